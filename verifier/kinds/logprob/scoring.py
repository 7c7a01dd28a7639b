"""Score logprob records: per candidate, KL statistics for the forced and decode paths, method, fingerprint.

What each figure is (docs: suites/logprob/README.md):

* ``kl_mean``: KL(reference || candidate) per token, **only** from an unbiased source: exact full distributions
  (built-in engine: teacher-forced through its DECODE step when it offers that, ``extra["kl_computation"] =
  "decode"``, so every position of a continuation is measured as generation computes it; else through prefill;
  along the reference's sampled continuations when measured, one sequence each, else on its
  greedy continuation; interval method ``exact_cluster_bootstrap_t``), else the sampled-token k3
  estimator on continuations sampled from the reference at temperature 1 (``sampled_k3_cluster_bootstrap_t``),
  else absent. ``extra["kl_method"]`` says which ("exact" / "sampled_k3").
* ``kl_topk_lower``: from top-k logprobs only a lower bound exists; its mean, with interval (decode path when
  measured, else the forced top-k path), and ``kl_tail_mass``: the reference's mass outside its top-k there.
* the decode path compares the two greedy outputs up to **and including** the first position where they
  diverge (both distributions there still condition on the same prefix); later positions condition on
  different texts and are not comparable (the sampled and exact paths, teacher-forced, cover every position).

Works from ``records.jsonl`` alone (exact-distribution KL was computed at run time and stored in the
candidate's record), so a finished run can be re-scored offline.

Every result counts its requests and errors as records.jsonl holds them, and per path the cases planned,
measured and lost to a failed request (on either side), so a failed request never makes its case vanish.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verifier.kinds.logprob.align import (
    Interner,
    LogprobFormatError,
    Position,
    TokenTrack,
    align_tracks,
    common_prefix,
)
from verifier.kinds.logprob.cluster_ci import cluster_mean_interval
from verifier.kinds.logprob.estimator import sampled_kl, topk_kl
from verifier.kinds.logprob.fingerprint import load_library, make_profile, match, reference_model
from verifier.kinds.logprob.fingerprint_null import calibrate_gap, reference_rows
from verifier.kinds.logprob.probe import ProbeResult
from verifier.kinds.logprob.stats import KLStats, kl_cdf_series, kl_statistics
from verifier.kinds.logprob.tracks import (
    CASE_ERROR,
    PROBE_FAILED,
    SAMPLE_PREFIX,
    forced_track,
    generation_track,
)
from verifier.records import ExchangeRecord, Interval
from verifier.run.summary import EndpointSuiteResult
from verifier.stats.intervals import wilson

FORCED_VARIANTS = ("forced_exact", "forced_echo", "forced_vllm")
UNBIASED_METHODS = frozenset({"exact", "sampled_k3"})


@dataclass
class PathData:
    """Aligned positions of one path (forced or decode) across cases, ready for statistics."""

    kl: list[np.ndarray] = field(default_factory=list)
    lower: list[np.ndarray] = field(default_factory=list)
    tail: list[np.ndarray] = field(default_factory=list)  # reference mass outside its top-k (top-k paths)
    k1: list[np.ndarray] = field(default_factory=list)  # sampled path: the k1 estimator beside k3
    ref_lp: list[np.ndarray] = field(default_factory=list)
    cand_lp: list[np.ndarray] = field(default_factory=list)
    same: list[np.ndarray] = field(default_factory=list)
    seq: list[np.ndarray] = field(default_factory=list)
    prompt: list[np.ndarray] = field(default_factory=list)  # the interval's cluster: the case the sequence is of
    case_ids: list[str] = field(default_factory=list)  # the case (or case/sample) of each entry of the lists
    prompts: dict[str, int] = field(default_factory=dict)  # case id -> cluster label
    #: per entry, each position's (offset in the continuation, token) where the path knows it (top-k paths), else None
    keys: list[list[tuple[int, str]] | None] = field(default_factory=list)
    methods: Counter = field(default_factory=Counter)
    misaligned: int = 0
    cases: int = 0
    failed: int = 0  # cases not measured because a request failed (reference's or this endpoint's)
    first_divergence: dict[str, int | None] = field(default_factory=dict)
    topk_abs_err: dict[int, list[np.ndarray]] = field(default_factory=dict)
    topk_est: dict[int, list[np.ndarray]] = field(default_factory=dict)
    topk_lower: dict[int, list[np.ndarray]] = field(default_factory=dict)

    def add(self, case: str, method: str, kl: np.ndarray, ref_lp: np.ndarray, cand_lp: np.ndarray, same: np.ndarray,
            lower: np.ndarray | None = None, tail: np.ndarray | None = None, prompt: str | None = None,
            keys: list[tuple[int, str]] | None = None) -> None:
        """One sequence's positions. ``prompt``: the case it belongs to (default ``case``): the sequences sampled from
        one prompt share it, so they are one cluster of the intervals, and prompts are the independent units."""
        if kl.size == 0:
            return
        self.kl.append(kl)
        self.lower.append(kl if lower is None else lower)
        self.tail.append(np.zeros(kl.size) if tail is None else tail)
        self.ref_lp.append(ref_lp)
        self.cand_lp.append(cand_lp)
        self.same.append(same.astype(float))
        self.seq.append(np.full(kl.size, self.cases))
        self.prompt.append(np.full(kl.size, self.prompts.setdefault(prompt or case, len(self.prompts))))
        self.case_ids.append(case)
        self.keys.append(keys)
        self.methods[method] += 1
        self.cases += 1

    def cat(self, name: str) -> np.ndarray:
        parts = getattr(self, name)
        return np.concatenate(parts) if parts else np.zeros(0)

    def position_keys(self) -> list[list[tuple[int, str]] | None]:
        """``keys`` per entry, None where unknown (also for entries a caller appended without keys)."""
        return self.keys + [None] * (len(self.case_ids) - len(self.keys))

    @property
    def unbiased(self) -> bool:
        """Every case measured by an unbiased per-token KL (exact, or sampled k3): a mean KL may be reported."""
        return bool(self.methods) and set(self.methods) <= UNBIASED_METHODS

    def stats(self) -> KLStats:
        method = next(iter(self.methods)) + "_" if self.unbiased and len(self.methods) == 1 else ""
        return kl_statistics(self.cat("kl"), self.cat("seq"), ref_token_logprob=self.cat("ref_lp"),
                             cand_token_logprob=self.cat("cand_lp"), same_top=self.cat("same"),
                             kl_lower=self.cat("lower"), tail_mass=self.cat("tail"), topk=not self.unbiased,
                             method=method, clusters=self.cat("prompt"))


def _forced_pair(ref: ExchangeRecord, cand: ExchangeRecord,
                 data: PathData) -> tuple[TokenTrack, TokenTrack, int] | None:
    """Both endpoints' teacher-forced tracks on the reference's continuation and where it starts, or None (counted
    as misaligned) when either reply cannot be read as that continuation."""
    cont = ref.extra.get("continuation", "")
    try:
        rt, start = forced_track(ref, cont)
        ct, _ = forced_track(cand, cont)
    except LogprobFormatError:
        data.misaligned += 1
        return None
    return rt, ct, start


def _topk_path(data: PathData, case: str, method: str, ref: TokenTrack, cand: TokenTrack, start: int) -> None:
    al = align_tracks(ref, cand, start_offset=start, interner=Interner())
    data.misaligned += al.misaligned
    if al.compared == 0:
        return
    est = topk_kl(al.ref, al.cand)
    data.add(case, method, est.kl, al.ref_token_lp, al.cand_token_lp, al.same_top, est.lower, est.ref_tail,
             keys=al.keys)


def _forced(recs: dict[tuple[str, str, str], ExchangeRecord], case_ids: list[str], ref_ep: str, ep: str,
            forced_on_reference: frozenset[str] = frozenset()) -> PathData:
    """``forced_on_reference``: cases whose forced text is the reference's generation (no fixed continuation):
    when that generation failed, the case is lost on this path too, and counted so."""
    data = PathData()
    for cid in case_ids:
        ref_gen = recs.get((ref_ep, cid, "generate"))
        if _case_error(recs, cid, ref_ep, ep) or (cid in forced_on_reference and ref_gen is not None
                                                  and not ref_gen.ok):
            data.failed += 1
            continue
        ce = recs.get((ep, cid, "forced_exact"))
        if ce is not None and not ce.ok:
            data.failed += 1
            continue
        if ce is not None and ce.ok and "kl" in ce.extra:
            x = ce.extra
            data.add(cid, "exact", np.asarray(x["kl"]), np.asarray(x["ref_token_lp"]), np.asarray(x["cand_token_lp"]),
                     np.asarray(x["same_top"]))
            exact = np.asarray(x["kl"])
            for key, val in x.items():
                if key.startswith("kl_top") and not key.endswith("_lower"):
                    k = int(key[len("kl_top"):])
                    data.topk_est.setdefault(k, []).append(np.asarray(val))
                    data.topk_abs_err.setdefault(k, []).append(np.abs(np.asarray(val) - exact))
                    data.topk_lower.setdefault(k, []).append(np.asarray(x.get(f"{key}_lower", val)))
            continue
        for variant in ("forced_echo", "forced_vllm"):
            r, c = recs.get((ref_ep, cid, variant)), recs.get((ep, cid, variant))
            if (r is not None and not r.ok) or (c is not None and not c.ok):
                data.failed += 1
                break
            if r is None or c is None:
                continue
            tracks = _forced_pair(r, c, data)
            if tracks is None:
                continue
            _topk_path(data, cid, r.extra.get("method", variant), *tracks)
            break
    return data


def _decode(recs: dict[tuple[str, str, str], ExchangeRecord], case_ids: list[str], ref_ep: str, ep: str) -> PathData:
    data = PathData()
    for cid in case_ids:
        r, c = recs.get((ref_ep, cid, "generate")), recs.get((ep, cid, "generate"))
        if _case_error(recs, cid, ref_ep, ep) or (r is not None and not r.ok) or (c is not None and not c.ok):
            data.failed += 1
            continue
        if r is None or c is None:
            continue
        try:
            rt, ct = generation_track(r), generation_track(c)
        except LogprobFormatError:
            continue
        m = common_prefix(rt, ct)
        diverged = m < min(len(rt.positions), len(ct.positions))
        data.first_divergence[cid] = m if diverged else None
        ref_part, cand_part = rt.positions[:m], ct.positions[:m]
        if diverged:  # the divergent position itself: both distributions condition on the same prefix
            ref_part = ref_part + [rt.positions[m]]
            cand_part = cand_part + [_as_reference_token(ct.positions[m], rt.positions[m])]
        _topk_path(data, cid, r.extra.get("method", "generate"), TokenTrack(ref_part), TokenTrack(cand_part), 0)
    return data


def _as_reference_token(cand: Position, ref: Position) -> Position:
    """The candidate's divergent position, relabelled with the reference's token so the pair aligns.

    Its distribution (``top``) is untouched: that is what KL compares. The candidate's logprob *of the
    reference's token* is read from its top-k when listed, else bounded by its smallest listed logprob.
    """
    lp = cand.top.get(ref.token)
    if lp is None and cand.top:
        lp = min(cand.top.values())
    return Position(token=ref.token, logprob=lp, top=cand.top, offset=ref.offset)


def _sampled_exact(recs: dict[tuple[str, str, str], ExchangeRecord], case_ids: list[str], ref_ep: str,
                   ep: str, prefix: str = "exact_" + SAMPLE_PREFIX, whole: bool = False) -> PathData:
    """Exact KL along the reference's sampled continuations (engines with full distributions): one sequence each,
    the sequences of one case one cluster.

    ``prefix`` picks the records: ``exact_sample<j>`` (teacher-forced through prefill), ``decode_exact_sample<j>``
    (through the decode step), or with ``whole`` the one variant named so: ``decode_exact`` (the greedy continuation
    through decode)."""
    data = PathData()
    for cid in case_ids:
        if _case_error(recs, cid, ref_ep, ep):
            continue
        for variant in sorted(v for (e, c, v) in recs
                              if e == ep and c == cid and (v == prefix if whole else v.startswith(prefix))):
            rec = recs[(ep, cid, variant)]
            if not rec.ok:
                data.failed += 1
                continue
            x = rec.extra
            if "kl" in x:
                data.add(cid if whole else f"{cid}/{variant}", "exact", np.asarray(x["kl"]),
                         np.asarray(x["ref_token_lp"]), np.asarray(x["cand_token_lp"]), np.asarray(x["same_top"]),
                         prompt=cid)
    return data


def _sampled(recs: dict[tuple[str, str, str], ExchangeRecord], case_ids: list[str], ref_ep: str,
             ep: str) -> PathData:
    """Sampled-token KL: continuations sampled from the reference (temperature 1), forced on both endpoints.

    Each sample is its own sequence; the samples of one case are one cluster of the interval (they share the
    prompt); k3 is the headline term, k1 kept beside it.
    """
    data = PathData()
    for cid in case_ids:
        if _case_error(recs, cid, ref_ep, ep):
            continue
        variants = sorted(v for (e, c, v) in recs
                          if e == ref_ep and c == cid and v.startswith("forced_" + SAMPLE_PREFIX))
        for variant in variants:
            r, c = recs.get((ref_ep, cid, variant)), recs.get((ep, cid, variant))
            if r is None or c is None:
                continue
            if not (r.ok and c.ok):
                data.failed += 1
                continue
            tracks = _forced_pair(r, c, data)
            if tracks is None:
                continue
            rt, ct, start = tracks
            al = align_tracks(rt, ct, start_offset=start, interner=Interner())
            data.misaligned += al.misaligned
            if al.compared == 0:
                continue
            est = sampled_kl(al.ref_token_lp, al.cand_token_lp)
            data.add(f"{cid}/{variant}", "sampled_k3", est.k3, al.ref_token_lp, al.cand_token_lp, al.same_top,
                     prompt=cid)
            data.k1.append(est.k1)
    return data


def _case_error(recs: dict[tuple[str, str, str], ExchangeRecord], cid: str, ref_ep: str, ep: str) -> bool:
    return (ref_ep, cid, CASE_ERROR) in recs or (ep, cid, CASE_ERROR) in recs


def _probe_for(recs: dict[tuple[str, str, str], ExchangeRecord], ep: str) -> ProbeResult | None:
    """The endpoint's clean probe; else its latest failed one (provider faults: support unknown)."""
    clean = [r for (e, _, v), r in recs.items() if e == ep and v == "probe" and "probe" in r.extra]
    failed = sorted(((int(v[len(PROBE_FAILED):] or 0), r) for (e, _, v), r in recs.items()
                     if e == ep and v.startswith(PROBE_FAILED) and "probe" in r.extra), key=lambda x: x[0])
    if clean:
        return ProbeResult.model_validate(clean[0].extra["probe"])
    return ProbeResult.model_validate(failed[-1][1].extra["probe"]) if failed else None


def _no_logprobs_note(probe: ProbeResult | None) -> str:
    if probe is None:
        return "no logprobs: the endpoint was not probed"
    if probe.errors():
        why = "; ".join(f"{m}: {e}" for m, e in probe.errors().items())
        return ("logprobs not measured: the capability probe failed at the provider after retries (an endpoint "
                f"error, not 'no logprobs'). {why}")
    why = "; ".join(f"{m}: {p.reason}" for m, p in probe.methods.items() if not p.supported and p.reason)
    return f"no logprobs: KL not measurable (not KL 0). {why}"


def _topk_error_table(data: PathData) -> dict[str, Any]:
    out: dict[str, Any] = {}
    exact = data.cat("kl")
    for k in sorted(data.topk_est):
        est = np.concatenate(data.topk_est[k])
        err = np.concatenate(data.topk_abs_err[k])
        low = np.concatenate(data.topk_lower[k])
        out[str(k)] = {"n": int(est.size), "exact_mean": float(exact.mean()) if exact.size else None,
                       "estimate_mean": float(est.mean()), "lower_mean": float(low.mean()),
                       "mean_abs_error": float(err.mean()), "median_abs_error": float(np.median(err)),
                       "relative_error_of_mean": float(abs(est.mean() - exact.mean()) / exact.mean())
                       if exact.size and exact.mean() > 0 else None}
    return out


def _reference_rows(recs: dict[tuple[str, str, str], ExchangeRecord], case_ids: list[str], ref_ep: str) -> np.ndarray:
    """The reference's decode-path top-k lists (plus a tail cell) over all cases: the A/A twins' raw material."""
    tops: list[dict[str, float]] = []
    for cid in case_ids:
        r = recs.get((ref_ep, cid, "generate"))
        if r is None or not r.ok:
            continue
        try:
            tops.extend(p.top for p in generation_track(r).positions)
        except LogprobFormatError:
            continue
    return reference_rows(tops)


def _reference_sha(records: list[ExchangeRecord], reference: str) -> str | None:
    """Weights hash when the reference serves the shipped model (so stale profiles are not used)."""
    from verifier.kinds.logprob.fingerprint import checkpoint_sha256

    for r in records:
        if r.endpoint == reference and isinstance(r.response, dict) and r.response.get("model") == "verifier-tiny":
            return checkpoint_sha256("tiny")
    return None


def _path_metrics(res: EndpointSuiteResult, have: dict[str, PathData]) -> None:
    """Per-path figures, and the headlines: ``kl_mean`` from an unbiased path only, ``kl_topk_lower`` otherwise.

    The llama.cpp figures (same top, delta p, ln PPL ratio) of the decode path are unprefixed when it was
    measured (it is what generated tokens go through, and the only path a decode-only quantization reaches);
    every other path's figures carry its name as prefix (``forced_``, ``decode_``, ``sampled_``).
    """
    headline = next(p for p in ("decode", "forced", "sampled", "sampled_exact", "decode_exact",
                                "sampled_decode_exact") if p in have)
    res.extra["headline_path"] = headline
    res.extra["method"] = ",".join(sorted(have[headline].methods))
    res.extra["paths"] = {}
    kl_by_path: dict[str, Interval] = {}
    for path, data in have.items():
        st = data.stats()
        kl_by_path[path] = st.kl_mean
        prefix = "" if path == headline else f"{path}_"
        for metric, iv in st.metrics().items():
            if path == "sampled" and metric.startswith("kl_"):
                if metric != "kl_mean":
                    continue  # percentiles of per-token k3 terms are not percentiles of KL
                metric = "kl_k3_mean"
            res.metrics[prefix + metric] = iv
        if path == "sampled":
            res.metrics[prefix + "kl_k1_mean"] = cluster_mean_interval(data.cat("k1"), data.cat("prompt"),
                                                                       method_prefix="sampled_k1_")
        res.counts[f"{path}_positions"] = st.n_positions
        res.counts[f"{path}_sequences"] = st.n_sequences
        res.counts[f"{path}_prompts"] = st.n_clusters or 0  # the intervals' clusters: the verdict's units
        res.counts[f"{path}_misaligned"] = data.misaligned
        res.series.append(kl_cdf_series(data.cat("kl"), f"KL CDF ({path}: {','.join(sorted(data.methods))}"
                                        + (", top-k estimate" if not data.unbiased else "") + ")"))
        res.extra["paths"][path] = {"methods": dict(data.methods), "stats": st.model_dump(exclude_none=True)}
    # kl_mean: exact full distributions through the decode step first (what generation computes, every position),
    # then through prefill, else sampled-token k3; never a top-k figure
    source = next((p for p in DECODE_SOURCES + PREFILL_SOURCES if p in have and have[p].unbiased), None)
    res.metrics.pop("kl_mean", None)
    withheld = _prefill_contradicted(have) if source in PREFILL_SOURCES else None
    if withheld is not None:
        res.extra["kl_mean_withheld"] = withheld
        res.notes.append(withheld)
        source = None
    if source is not None:
        res.metrics["kl_mean"] = kl_by_path[source]
        res.extra["kl_method"] = "sampled_k3" if source == "sampled" else "exact"
        res.extra["kl_path"] = source
        res.extra["kl_computation"] = "decode" if source in DECODE_SOURCES else "prefill"
    # kl_topk_lower / kl_tail_mass: the decode path's when measured, else the forced top-k path's
    topk_path = next((p for p in ("decode", "forced") if p in have and not have[p].unbiased), None)
    if topk_path is not None:
        res.extra["kl_topk_path"] = topk_path
    if topk_path is not None and topk_path != headline:
        for name in ("kl_topk_lower", "kl_tail_mass"):
            if f"{topk_path}_{name}" in res.metrics:
                res.metrics[name] = res.metrics[f"{topk_path}_{name}"]
    notes = {"sampled_decode_exact": "kl_mean: exact KL from full next-token distributions along continuations "
                                     "sampled from the reference at temperature 1, teacher-forced through the "
                                     "engine's DECODE step on both sides (every position; one sequence each)",
             "decode_exact": "kl_mean: exact KL from full next-token distributions on the reference's greedy "
                             "continuation, teacher-forced through the engine's DECODE step on both sides (every "
                             "position)",
             "sampled_exact": "kl_mean: exact KL from full next-token distributions along continuations sampled "
                              "from the reference at temperature 1 (teacher-forced prefill path), one sequence each",
             "forced": "kl_mean: exact KL from full next-token distributions on the reference's greedy continuation "
                       "(teacher-forced prefill path)",
             "sampled": "kl_mean: sampled-token k3 estimator (Schulman 2020) on continuations sampled from the "
                           "reference at temperature 1, teacher-forced on both endpoints (prefill path)"}
    if source is not None:
        res.notes.append(notes[source])
    if source in DECODE_SOURCES and any(p in have for p in PREFILL_SOURCES):
        res.notes.append("forced_*, sampled_exact_* and sampled_kl_* figures are teacher-forced through prefill: a "
                         "quantization applied only when decoding does not reach them")
    elif withheld is None:
        res.notes.append("no kl_mean: neither full distributions nor sampled-token logprobs were measured; "
                         "kl_topk_lower is a lower bound on KL, not an estimate of it")
    if "decode" in have and source not in DECODE_SOURCES:
        res.notes.append("decode path (greedy generation, common prefix with the reference up to and including the "
                         "first divergence) has top-k logprobs only: kl_topk_lower is a lower bound; a decode-only "
                         "quantization is invisible to the teacher-forced (prefill) figures")


#: kl_mean sources, in order of preference: exact through the decode step (the built-in engine's forced decode),
#: then the teacher-forced prefill figures (exact, then sampled-token k3 over echo: all a remote API allows)
DECODE_SOURCES = ("sampled_decode_exact", "decode_exact")
PREFILL_SOURCES = ("sampled_exact", "forced", "sampled")

#: The decode path's lower bound must exceed the teacher-forced KL by more than this (nats) to contradict it:
#: BF16 twins differ by numerical noise of 1e-6..1e-4 on the decode path (see fingerprint.KL_FLOOR).
DECODE_CONTRADICTION = 1e-4


def decode_vs_forced(decode: PathData, forced: PathData) -> tuple[float, float, int] | None:
    """(decode lower-bound mean, forced KL mean, positions) over the positions both paths measured on the same text.

    The decode path covers the start of the reference's greedy continuation (common prefix + first divergence);
    the forced path is teacher-forced on that whole continuation: its first positions are the same contexts, as long
    as the forced text tokenizes back into the tokens generated. It need not: a generated partial UTF-8 byte, or a
    merge BPE would not produce, comes back as other tokens, and every forced position after it conditions on other
    tokens. Where both paths know each position's (offset, token) (top-k paths), positions are matched by it and
    the comparison stops at the first generated position the forced text does not reproduce; where the forced path
    does not (exact KL records carry no tokens), positions are compared by index, as before.
    """
    f_by_case = dict(zip(forced.case_ids, zip(forced.kl, forced.position_keys())))
    low_sum = kl_sum = 0.0
    n = 0
    for cid, low, d_keys in zip(decode.case_ids, decode.lower, decode.position_keys()):
        if cid not in f_by_case:
            continue
        f, f_keys = f_by_case[cid]
        if d_keys is not None and f_keys is not None:
            at = {k: i for i, k in enumerate(f_keys)}
            idx: list[int] = []
            for k in d_keys:
                if k not in at:
                    break
                idx.append(at[k])
            low, f = low[:len(idx)], f[idx]
        elif f.size < low.size:
            continue
        else:
            f = f[:low.size]
        low_sum += float(low.sum())
        kl_sum += float(f.sum())
        n += int(low.size)
    return (low_sum / n, kl_sum / n, n) if n else None


def _prefill_contradicted(have: dict[str, PathData]) -> str | None:
    """Why a teacher-forced ``kl_mean`` does not describe what this endpoint generates, or None.

    Every unbiased path forces text through the *prefill* computation. A quantization applied only when decoding
    (INT4 decode weights, an FP8 KV cache read back after prefill) leaves it untouched, so its exact KL can be 0
    while generated tokens differ. On the same positions, the decode path's guaranteed lower bound cannot exceed
    the forced path's KL when both run the same computation (up to BF16 noise, ``DECODE_CONTRADICTION``); when it
    does, the forced figure is not KL of the served tokens: it is kept under its path's name, never as kl_mean.
    """
    if "decode" not in have or "forced" not in have:
        return None
    cmp = decode_vs_forced(have["decode"], have["forced"])
    if cmp is None:
        return None
    low, forced_kl, n = cmp
    if low <= forced_kl + DECODE_CONTRADICTION:
        return None
    return (f"kl_mean withheld: on the same {n} positions the decode path's top-k lower bound ({low:.3g} nats) is "
            f"above the teacher-forced (prefill) KL ({forced_kl:.3g}): this endpoint differs when decoding, which "
            "teacher forcing does not reach, and no unbiased decode-path KL exists over this API")


def score_logprob(suite: Any, records: list[ExchangeRecord], reference: str,
                  endpoints: list[str]) -> list[EndpointSuiteResult]:
    name = suite.manifest.name
    recs = {(r.endpoint, r.case_id, r.variant or ""): r for r in records if r.kind == "logprob"}
    case_ids = [c.id for c in suite.cases]
    probes = {ep: p for ep in endpoints if (p := _probe_for(recs, ep)) is not None}
    try:
        from pathlib import Path

        from verifier.kinds.logprob.fingerprint import PROFILES_FILE

        library = load_library(name, Path(suite.profiles_path)
                               if getattr(suite, 'profiles_path', None) else PROFILES_FILE)
    except ValueError:
        library = None
    ref_rows: np.ndarray | None = None  # the reference's decode distributions, for the fingerprint's A/A null
    ref_sha = _reference_sha(records, reference)
    ref_model = reference_model(records, reference)
    results: list[EndpointSuiteResult] = []
    for ep in endpoints:
        probe = probes.get(ep)
        res = EndpointSuiteResult(endpoint=ep, suite=name, kind="logprob", is_reference=ep == reference)
        mine = [r for r in records if r.kind == "logprob" and r.endpoint == ep and r.suite == name]
        res.counts["requests"] = len(mine)  # records, as records.jsonl holds them (the probe is one record)
        res.counts["request_errors"] = sum(1 for r in mine if not r.ok)
        res.counts["cases_planned"] = len(case_ids)
        if probe is not None:
            res.extra["probe"] = {m: p.model_dump(exclude_none=True) for m, p in probe.methods.items()}
            if probe.errors():
                res.counts["probe_errors"] = len(probe.errors())
                res.notes.append(_no_logprobs_note(probe) if not any(p.supported for p in probe.methods.values())
                                 else "capability probe met provider faults for "
                                 + ", ".join(sorted(probe.errors())) + ": those methods are unknown, not unsupported")
        if ep == reference:
            res.notes.append("reference: its greedy continuation is what every endpoint is forced on")
            results.append(res)
            continue
        on_ref = frozenset(c.id for c in suite.cases if getattr(c, "continuation", None) is None)
        forced, decode = _forced(recs, case_ids, reference, ep, on_ref), _decode(recs, case_ids, reference, ep)
        sampled = _sampled(recs, case_ids, reference, ep)
        paths = {"forced": forced, "decode": decode, "sampled": sampled,
                 "sampled_exact": _sampled_exact(recs, case_ids, reference, ep),
                 "decode_exact": _sampled_exact(recs, case_ids, reference, ep, prefix="decode_exact", whole=True),
                 "sampled_decode_exact": _sampled_exact(recs, case_ids, reference, ep,
                                                        prefix="decode_exact_" + SAMPLE_PREFIX)}
        for path, data in paths.items():  # planned vs measured, per path: a failed request never hides its case
            res.counts[f"{path}_cases_measured"] = data.cases
            res.counts[f"{path}_cases_failed"] = data.failed
            if data.failed:
                res.notes.append(f"{path} path: {data.failed} {'sample(s)' if path == 'sampled' else 'case(s)'} "
                                 f"not measured because a request failed (reference's or this endpoint's); "
                                 f"measured {data.cases}.")
        have = {k: v for k, v in paths.items() if v.cases}
        if not have:
            if not (probe is not None and probe.errors() and not any(p.supported for p in probe.methods.values())):
                res.notes.append(_no_logprobs_note(probe))
            results.append(res)
            continue
        _path_metrics(res, have)
        if decode.first_divergence:
            vals = [v for v in decode.first_divergence.values() if v is not None]
            res.extra["first_divergence"] = decode.first_divergence
            res.metrics["greedy_diverged"] = wilson(len(vals), len(decode.first_divergence))
            if vals:
                res.metrics["first_divergence_median"] = Interval(value=float(np.median(vals)), n=len(vals),
                                                                  method="median")
        if forced.topk_est:
            res.extra["topk_error_vs_exact"] = _topk_error_table(forced)
        profile = make_profile({p: (d.cat("kl"), d.cat("same")) for p, d in have.items()
                                if p in ("forced", "decode")})
        res.extra["profile"] = profile.model_dump()
        fp = match(profile, library, suite_hash=suite.manifest.content_hash, model_sha256=ref_sha,
                   served_model=ref_model)
        if library is not None and fp.verdict not in ("no profiles",) and fp.ranking:
            if ref_rows is None:
                ref_rows = _reference_rows(recs, case_ids, reference)
            cal = calibrate_gap(profile, library, ref_rows)
            fp = fp.model_copy(update={"gap": cal.gap, "p_value": cal.p_value, "false_alarm_rate": cal.false_alarm_rate,
                                       "false_alarm_n": cal.false_alarm_n, "margin_calibrated": cal.margin,
                                       "alpha": cal.alpha, "null_model": cal.method})
        res.extra["fingerprint"] = fp.model_dump()
        results.append(res)
    return results
