"""The ``cache`` suite kind: prompt-cache hit rates on multi-turn sessions with growing shared prefixes.

Each session is sent turn by turn (in order: turn t's prompt extends turn t-1's), sessions run
concurrently. Per endpoint:

* hit rate = sum(cached tokens) / sum(prompt tokens) over every request *after the first of its
  session* (the first request can only hit a cache warmed by someone else, so it is excluded), with a
  95% interval from resampling whole sessions;
* cacheable bound = sum(previous request's prompt tokens) / sum(prompt tokens) over the same requests:
  the longest prefix this session had already sent (providers cache in blocks, e.g. OpenAI from 1,024
  tokens in 128-token steps, the built-in engine in pages, so real hits sit a little under it);
* class: ``not_reported`` (no cached-token field at all), ``reported_zero``, ``partial``, ``near_bound``
  (>= 80% of the bound). Absent is never shown as zero: a structurally zero hit rate looks like a broken
  cache, and an absent field says nothing about the cache.

vLLM reports ``prompt_tokens_details.cached_tokens`` only when the server is started with
``--enable-prompt-tokens-details``; without it the field is absent and we say so.

Turns left out of the hit rate are counted by why: ``excluded_after_failed_turn`` (the previous turn's request
failed, so the cacheable prefix is unknown) and ``excluded_without_prompt_tokens`` (this or the previous answer's
usage had no ``prompt_tokens``). ``requests`` and ``request_errors`` match records.jsonl.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verifier.run.exchange_guard import guarded
from verifier.records import ExchangeRecord, Interval, SuiteManifest
from verifier.run.summary import Comparison, EndpointSuiteResult, InputProblem, Series
from suites import SUITES_DIR

DATA_DIR = SUITES_DIR / "cache"
BUILTIN_SUITES = {
    "cache-smoke": "8 short 4-turn sessions (growing prefixes; half share one system prompt), for the tiny built-in model",
    "cache-long": "12 5-turn sessions over 1,024 prompt tokens from the first turn, for real providers",
}
NEAR_BOUND = 0.8
VLLM_HINT = ("vLLM reports cached tokens only when started with --enable-prompt-tokens-details; other servers may "
             "not report them at all")
CacheClass = Literal["not_reported", "reported_zero", "partial", "near_bound", "no_data"]


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str
    assistant: str


class Session(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    group: str = "growing"
    system: str | None = None
    turns: list[Turn] = Field(min_length=2)
    max_tokens: int = Field(default=4, ge=1, le=256)

    def messages(self, t: int) -> list[dict[str, str]]:
        """The conversation sent at turn ``t``: earlier turns with the suite's fixed assistant replies."""
        msgs: list[dict[str, str]] = [{"role": "system", "content": self.system}] if self.system else []
        for prev in self.turns[:t]:
            msgs += [{"role": "user", "content": prev.user}, {"role": "assistant", "content": prev.assistant}]
        msgs.append({"role": "user", "content": self.turns[t].user})
        return msgs


@dataclass
class LoadedCacheSuite:
    manifest: SuiteManifest
    cases: list[Session]
    problems: list[InputProblem] = field(default_factory=list)
    tokenizer_dir: str | None = None  # --option tokenizer=DIR: count prompts locally (token accounting)


def load_sessions(path: Path, *, strict: bool = False) -> tuple[list[Session], list[InputProblem]]:
    if not path.is_file():
        raise FileNotFoundError(f"cache suite {path}: no such file")
    out: list[Session] = []
    problems: list[InputProblem] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Session.model_validate(json.loads(line)))
            continue
        except json.JSONDecodeError as e:
            msg = f"not JSON ({e.msg})"
        except ValidationError as e:
            err = e.errors()[0]
            msg = f"{'.'.join(str(x) for x in err['loc']) or 'session'}: {err['msg']}"
        if strict:
            raise ValueError(f"{path}:{n}: {msg}")
        problems.append(InputProblem(source=str(path), line=n, message=msg))
    return out, problems


# ---------------------------------------------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------------------------------------------

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
    fields = {r.usage.cached_field for r in records if r.kind == "cache" and r.endpoint == endpoint and r.usage.cached_field}
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


# ---------------------------------------------------------------------------------------------------------------
# the kind
# ---------------------------------------------------------------------------------------------------------------

class CacheKind:
    kind = "cache"

    def load(self, ref: str, options: dict) -> LoadedCacheSuite:
        strict = bool(options.get("strict", False))
        path = DATA_DIR / f"{ref}.jsonl" if ref in BUILTIN_SUITES else Path(ref)
        sessions, problems = load_sessions(path, strict=strict)
        if options.get("limit"):
            sessions = sessions[: int(options["limit"])]
        canon = "\n".join(json.dumps(s.model_dump(), sort_keys=True) for s in sessions)
        name = ref if ref in BUILTIN_SUITES else (path.stem if path.stem.startswith("cache") else f"cache-{path.stem}")
        man = SuiteManifest(name=name, version="1", kind="cache", case_count=len(sessions),
                            content_hash=hashlib.sha256(canon.encode()).hexdigest(),
                            source=f"builtin:{ref}" if ref in BUILTIN_SUITES else str(path), skipped_lines=len(problems))
        tok = options.get("tokenizer")
        if tok and not (Path(tok) / "tokenizer.json").is_file():
            raise FileNotFoundError(f"--option tokenizer={tok}: no tokenizer.json in that folder")
        return LoadedCacheSuite(manifest=man, cases=sessions, problems=problems, tokenizer_dir=tok)

    def planned_exchanges(self, suite: LoadedCacheSuite, ctx: Any) -> int:
        return len(ctx.endpoints) * sum(len(s.turns) for s in suite.cases)

    async def run(self, suite: LoadedCacheSuite, ctx: Any) -> None:
        done = ctx.store.done_keys()
        name = suite.manifest.name
        ctx.progress.advance_resumed(r for r in ctx.store.read(kind="cache", suite=name) if r.endpoint in ctx.endpoints)

        async def session(ep: str, s: Session) -> None:
            client = ctx.clients[ep]
            for t in range(len(s.turns)):  # in order: each turn extends the previous prompt
                if (name, s.id, ep, 0, t, None) in done:
                    continue
                body = {"messages": s.messages(t), "max_tokens": s.max_tokens, "temperature": 0}
                ex = await guarded(client.chat(body), body, stream=bool(client.config.stream))
                rec = ExchangeRecord(**ex.model_dump(), kind="cache", suite=name, case_id=s.id, endpoint=ep, step=t,
                                     extra={"group": s.group})
                ctx.store.append(rec)
                ctx.progress.advance(error=not rec.ok, retried=max(0, rec.attempts - 1))

        # endpoints one after another (so one endpoint's load does not skew another's cache), sessions concurrent
        for ep in ctx.endpoints:
            await asyncio.gather(*(session(ep, s) for s in suite.cases))

    def score(self, suite: LoadedCacheSuite, records: list[ExchangeRecord], reference: str,
              endpoints: list[str]) -> list[EndpointSuiteResult]:
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
            self._accounting(suite, records, ep, res)
            out.append(res)
        return out

    def _accounting(self, suite: LoadedCacheSuite, records: list[ExchangeRecord], ep: str,
                    res: EndpointSuiteResult) -> None:
        """Prompt-token accounting where the tokenizer is known (the shipped model, or --option tokenizer=DIR)."""
        from verifier.kinds.cache.token_accounting import TokenizerUnavailable, compare_counts, note, tokenizer_for

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
            if s is not None and r.step is not None and r.step < len(s.turns):
                pairs.append((int(r.usage.prompt_tokens), tok.count_chat(s.messages(int(r.step)))))
        summary = compare_counts(pairs)
        res.metrics.update(summary.metrics())
        res.extra["token_accounting"] = summary.model_dump()
        line = note(summary)
        if line:
            res.notes.append(line)


CACHE_KIND = CacheKind()
