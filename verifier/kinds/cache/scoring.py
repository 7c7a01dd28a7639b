"""Score cache records: per endpoint the hit rate over requests after the first of each session, the cacheable
bound, the class (not reported / reported zero / partial / near bound), and the paired difference to the reference.

See :mod:`verifier.kinds.cache.kind` for the definitions; this module reads ``records.jsonl`` alone, so a finished
run can be re-scored offline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel

from verifier.kinds.cache.sessions import LoadedCacheSuite
from verifier.kinds.cache.token_accounting import TokenizerUnavailable, compare_counts, note, tokenizer_for
from verifier.records import ExchangeRecord, Interval
from verifier.run.summary import Comparison, EndpointSuiteResult, Series

NEAR_BOUND = 0.8
VLLM_HINT = ("vLLM reports cached tokens only when started with --enable-prompt-tokens-details; other servers may "
             "not report them at all")
CacheClass = Literal["not_reported", "reported_zero", "partial", "near_bound", "no_data"]



class CacheRequest(BaseModel):
    """One request after the first of its session, as the hit-rate figures use it."""

    session: str
    turn: int
    prompt_tokens: int
    cached_tokens: int | None
    previous_prompt_tokens: int


def requests_from_records(records: list[ExchangeRecord], endpoint: str) -> tuple[list[CacheRequest], dict[str, int]]:
    """Counted requests (turn >= 1, both this and the previous turn answered with prompt_tokens) and counts."""
    by_session: dict[str, dict[int, ExchangeRecord]] = {}
    counts = {"requests": 0, "request_errors": 0, "first_turns": 0, "excluded_after_failed_turn": 0,
              "excluded_without_prompt_tokens": 0}
    for r in records:
        if r.kind != "cache" or r.endpoint != endpoint:
            continue
        counts["requests"] += 1
        if not r.ok:
            counts["request_errors"] += 1
            continue
        by_session.setdefault(r.case_id, {})[int(r.step or 0)] = r
    out: list[CacheRequest] = []
    for sid, turns in by_session.items():
        for t, r in sorted(turns.items()):
            if t == 0:
                counts["first_turns"] += 1
                continue
            prev = turns.get(t - 1)
            if prev is None:
                counts["excluded_after_failed_turn"] += 1
                continue
            if r.usage.prompt_tokens is None or prev.usage.prompt_tokens is None:
                counts["excluded_without_prompt_tokens"] += 1
                continue
            out.append(CacheRequest(session=sid, turn=t, prompt_tokens=r.usage.prompt_tokens,
                                    cached_tokens=r.usage.cached_tokens,
                                    previous_prompt_tokens=prev.usage.prompt_tokens))
    return out, counts


def _session_sums(reqs: list[CacheRequest], sessions: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    idx = {s: i for i, s in enumerate(sessions)}
    cached, prompt, bound = np.zeros(len(sessions)), np.zeros(len(sessions)), np.zeros(len(sessions))
    for r in reqs:
        i = idx[r.session]
        cached[i] += r.cached_tokens or 0
        prompt[i] += r.prompt_tokens
        bound[i] += min(r.previous_prompt_tokens, r.prompt_tokens)
    return cached, prompt, bound


def _ratio_ci(num: np.ndarray, den: np.ndarray, n_boot: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """Percentile interval of sum(num)/sum(den) resampling sessions (the ratio of sums is not a plain mean)."""
    g = num.size
    if g < 2:
        return None
    pick = np.random.default_rng(seed).integers(0, g, size=(n_boot, g))
    d = den[pick].sum(axis=1)
    ok = d > 0
    boot = num[pick].sum(axis=1)[ok] / d[ok]
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return float(lo), float(hi)


def classify(reqs: list[CacheRequest], rate: float | None, bound: float | None) -> CacheClass:
    if not reqs:
        return "no_data"
    if all(r.cached_tokens is None for r in reqs):
        return "not_reported"
    if rate is None or rate <= 0:
        return "reported_zero"
    if bound and rate >= NEAR_BOUND * bound:
        return "near_bound"
    return "partial"


@dataclass
class CacheFigures:
    cls: CacheClass
    hit_rate: Interval
    bound: Interval
    by_turn: Series | None
    sessions: list[str]
    cached: np.ndarray
    prompt: np.ndarray
    counts: dict[str, int]
    cached_field: str | None


def cache_figures(records: list[ExchangeRecord], endpoint: str) -> CacheFigures:
    reqs, counts = requests_from_records(records, endpoint)
    sessions = sorted({r.session for r in reqs})
    reported = [r for r in reqs if r.cached_tokens is not None]
    cached, prompt, _ = _session_sums(reported, sessions)
    _, prompt_all, bnd_all = _session_sums(reqs, sessions)
    n = len(reported)
    tot_p = float(prompt.sum())
    rate = float(cached.sum() / tot_p) if tot_p > 0 else None
    bound = float(bnd_all.sum() / prompt_all.sum()) if prompt_all.sum() > 0 else None
    ci = _ratio_ci(cached, prompt) if rate is not None else None
    hit = Interval(value=rate, low=ci[0] if ci else None, high=ci[1] if ci else None, n=n,
                   method="session_bootstrap_ratio")
    bound_iv = Interval(value=bound, n=len(reqs), method="previous_prompt_prefix")
    by_turn = None
    turns = sorted({r.turn for r in reported})
    if turns:
        ys, bs = [], []
        for t in turns:
            rs = [r for r in reported if r.turn == t]
            p = sum(r.prompt_tokens for r in rs)
            ys.append(sum(r.cached_tokens or 0 for r in rs) / p if p else 0.0)
            bs.append(sum(min(r.previous_prompt_tokens, r.prompt_tokens) for r in rs) / p if p else 0.0)
        by_turn = Series(name="cache hit rate by turn", x=[float(t) for t in turns], y=ys, high=bs,
                         x_label="turn (0 = first, excluded)", y_label="cached / prompt tokens (band top: bound)")
    fields = {r.usage.cached_field for r in records if r.kind == "cache" and r.endpoint == endpoint
              and r.usage.cached_field}
    counts = {**counts, "counted_requests": n, "prompt_tokens": int(tot_p), "cached_tokens": int(cached.sum()),
              "sessions": len(sessions)}
    return CacheFigures(cls=classify(reqs, rate, bound), hit_rate=hit, bound=bound_iv, by_turn=by_turn,
                        sessions=sessions, cached=cached, prompt=prompt, counts=counts,
                        cached_field=sorted(fields)[0] if fields else None)


def paired_difference(a: CacheFigures, b: CacheFigures, n_boot: int = 2000, seed: int = 0) -> Interval | None:
    """(b - a) hit rate with an interval resampling the sessions both endpoints answered."""
    common = sorted(set(a.sessions) & set(b.sessions))
    if len(common) < 2 or a.hit_rate.value is None or b.hit_rate.value is None:
        return None
    ia = [a.sessions.index(s) for s in common]
    ib = [b.sessions.index(s) for s in common]
    ca, pa, cb, pb = a.cached[ia], a.prompt[ia], b.cached[ib], b.prompt[ib]
    pick = np.random.default_rng(seed).integers(0, len(common), size=(n_boot, len(common)))
    da, db = pa[pick].sum(axis=1), pb[pick].sum(axis=1)
    ok = (da > 0) & (db > 0)
    boot = cb[pick].sum(axis=1)[ok] / db[ok] - ca[pick].sum(axis=1)[ok] / da[ok]
    lo, hi = np.quantile(boot, [0.025, 0.975])
    val = float(cb.sum() / pb.sum() - ca.sum() / pa.sum())
    return Interval(value=val, low=float(lo), high=float(hi), n=len(common), method="paired_session_bootstrap")


NOTES: dict[str, str] = {
    "not_reported": "cache not reported: the usage has no cached-token field (absent, not zero). " + VLLM_HINT,
    "reported_zero": "cache reported as zero on every request after the first of its session: no prefix caching "
                     "(or a cache that never hits)",
    "partial": "partial cache hits: below 80% of the cacheable bound",
    "near_bound": "cache hits near the cacheable bound",
    "no_data": "no usable requests after the first of a session",
}


def score_cache(suite: LoadedCacheSuite, records: list[ExchangeRecord], reference: str,
                endpoints: list[str]) -> list[EndpointSuiteResult]:
    """Per endpoint: hit rate, bound and class; against the reference, the paired difference."""
    figs = {ep: cache_figures(records, ep) for ep in endpoints}
    out = []
    for ep in endpoints:
        f = figs[ep]
        res = EndpointSuiteResult(endpoint=ep, suite=suite.manifest.name, kind="cache", is_reference=ep == reference,
                                  counts=f.counts)
        res.extra["cache_class"] = f.cls
        res.extra["cached_field"] = f.cached_field
        res.notes.append(NOTES[f.cls])
        if f.cls not in ("not_reported", "no_data"):
            res.metrics["cache_hit_rate"] = f.hit_rate
            res.metrics["cache_bound"] = f.bound
            if f.by_turn:
                res.series.append(f.by_turn)
            if ep != reference and figs[reference].cls not in ("not_reported", "no_data"):
                diff = paired_difference(figs[reference], f)
                if diff is not None:
                    res.comparisons["cache_hit_rate"] = Comparison(metric="cache_hit_rate", difference=diff,
                                                                   test="paired_session_bootstrap")
        elif f.bound.value is not None:
            res.metrics["cache_bound"] = f.bound
        _accounting(suite, records, ep, res)
        out.append(res)
    return out

def _accounting(suite: LoadedCacheSuite, records: list[ExchangeRecord], ep: str, res: EndpointSuiteResult) -> None:
    """Prompt-token accounting where the tokenizer is known (the shipped model, or --option tokenizer=DIR)."""
    mine = [r for r in records if r.kind == "cache" and r.endpoint == ep and r.ok and r.usage.prompt_tokens is not None]
    if not mine:
        return
    model = next((r.response.get("model") for r in mine if isinstance(r.response, dict)), None)
    try:
        tok = tokenizer_for(model, suite.tokenizer_dir)
    except TokenizerUnavailable as e:
        res.notes.append(f"token accounting skipped: {e}")
        return
    if tok is None:
        return
    sessions = {s.id: s for s in suite.cases}
    pairs = []
    for r in mine:
        s = sessions.get(r.case_id)
        if s is not None and r.step is not None and r.step < len(s.turns) and r.usage.prompt_tokens is not None:
            pairs.append((int(r.usage.prompt_tokens), tok.count_chat(s.messages(int(r.step)))))
    summary = compare_counts(pairs)
    res.metrics.update(summary.metrics())
    res.extra["token_accounting"] = summary.model_dump()
    line = note(summary)
    if line:
        res.notes.append(line)
