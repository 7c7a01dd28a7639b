"""Score logprob records: per candidate, KL statistics for the forced and decode paths, method, fingerprint.

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

from verifier.kinds.logprob.align import Interner, LogprobFormatError, TokenTrack, align_tracks, common_prefix
from verifier.kinds.logprob.estimator import topk_kl
from verifier.kinds.logprob.fingerprint import load_library, make_profile, match, reference_model
from verifier.kinds.logprob.probe import ProbeResult
from verifier.kinds.logprob.stats import KLStats, kl_cdf_series, kl_statistics
from verifier.kinds.logprob.tracks import CASE_ERROR, PROBE_FAILED, forced_track, generation_track
from verifier.records import ExchangeRecord, Interval
from verifier.run.summary import EndpointSuiteResult
from verifier.stats.intervals import wilson

FORCED_VARIANTS = ("forced_exact", "forced_echo", "forced_vllm")


@dataclass
class PathData:
    """Aligned positions of one path (forced or decode) across cases, ready for statistics."""

    kl: list[np.ndarray] = field(default_factory=list)
    lower: list[np.ndarray] = field(default_factory=list)
    ref_lp: list[np.ndarray] = field(default_factory=list)
    cand_lp: list[np.ndarray] = field(default_factory=list)
    same: list[np.ndarray] = field(default_factory=list)
    seq: list[np.ndarray] = field(default_factory=list)
    methods: Counter = field(default_factory=Counter)
    misaligned: int = 0
    cases: int = 0
    failed: int = 0  # cases not measured because a request failed (reference's or this endpoint's)
    first_divergence: dict[str, int | None] = field(default_factory=dict)
    topk_abs_err: dict[int, list[np.ndarray]] = field(default_factory=dict)
    topk_est: dict[int, list[np.ndarray]] = field(default_factory=dict)
    topk_lower: dict[int, list[np.ndarray]] = field(default_factory=dict)

    def add(self, case: str, method: str, kl: np.ndarray, ref_lp: np.ndarray, cand_lp: np.ndarray, same: np.ndarray,
            lower: np.ndarray | None = None) -> None:
        if kl.size == 0:
            return
        self.kl.append(kl)
        self.lower.append(kl if lower is None else lower)
        self.ref_lp.append(ref_lp)
        self.cand_lp.append(cand_lp)
        self.same.append(same.astype(float))
        self.seq.append(np.full(kl.size, self.cases))
        self.methods[method] += 1
        self.cases += 1

    def cat(self, name: str) -> np.ndarray:
        parts = getattr(self, name)
        return np.concatenate(parts) if parts else np.zeros(0)

    def stats(self) -> KLStats:
        return kl_statistics(self.cat("kl"), self.cat("seq"), ref_token_logprob=self.cat("ref_lp"),
                             cand_token_logprob=self.cat("cand_lp"), same_top=self.cat("same"),
                             kl_lower=self.cat("lower"))


def _topk_path(data: PathData, case: str, method: str, ref: TokenTrack, cand: TokenTrack, start: int) -> None:
    al = align_tracks(ref, cand, start_offset=start, interner=Interner())
    data.misaligned += al.misaligned
    if al.compared == 0:
        return
    est = topk_kl(al.ref, al.cand)
    data.add(case, method, est.kl, al.ref_token_lp, al.cand_token_lp, al.same_top, est.lower)


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
            cont = r.extra.get("continuation", "")
            try:
                rt, start = forced_track(r, cont)
                ct, _ = forced_track(c, cont)
            except LogprobFormatError:
                data.misaligned += 1
                continue
            _topk_path(data, cid, r.extra.get("method", variant), rt, ct, start)
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
        data.first_divergence[cid] = m if m < min(len(rt.positions), len(ct.positions)) else None
        _topk_path(data, cid, r.extra.get("method", "generate"), TokenTrack(rt.positions[:m]),
                   TokenTrack(ct.positions[:m]), 0)
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


def _reference_sha(records: list[ExchangeRecord], reference: str) -> str | None:
    """Weights hash when the reference serves the shipped model (so stale profiles are not used)."""
    from verifier.kinds.logprob.fingerprint import checkpoint_sha256

    for r in records:
        if r.endpoint == reference and isinstance(r.response, dict) and r.response.get("model") == "verifier-tiny":
            return checkpoint_sha256("tiny")
    return None


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
        paths = {"forced": forced, "decode": decode}
        for path, data in paths.items():  # planned vs measured, per path: a failed request never hides its case
            res.counts[f"{path}_cases_measured"] = data.cases
            res.counts[f"{path}_cases_failed"] = data.failed
            if data.failed:
                res.notes.append(f"{path} path: {data.failed} of {len(case_ids)} case(s) not measured because a "
                                 f"request failed (reference's or this endpoint's); measured {data.cases}.")
        have = {k: v for k, v in paths.items() if v.cases}
        if not have:
            if not (probe is not None and probe.errors() and not any(p.supported for p in probe.methods.values())):
                res.notes.append(_no_logprobs_note(probe))
            results.append(res)
            continue
        # The decode path is the headline when measured: it is what generated tokens go through (a
        # decode-only quantization, e.g. INT4 decode weights or a KV cache read back in low precision,
        # leaves the teacher-forced prefill path untouched) and it is the ordinary-looking request.
        headline = "decode" if "decode" in have else "forced"
        res.extra["method"] = ",".join(sorted(have[headline].methods))
        res.extra["headline_path"] = headline
        res.extra["paths"] = {}
        for path, data in have.items():
            st = data.stats()
            prefix = "" if path == headline else f"{path}_"
            for metric, iv in st.metrics().items():
                res.metrics[prefix + metric] = iv
            res.counts[f"{path}_positions"] = st.n_positions
            res.counts[f"{path}_sequences"] = st.n_sequences
            res.counts[f"{path}_misaligned"] = data.misaligned
            methods = res.extra["method"] if path == headline else ",".join(sorted(data.methods))
            res.series.append(kl_cdf_series(data.cat("kl"), f"KL CDF ({path}: {methods})"))
            res.extra["paths"][path] = {"methods": dict(data.methods), "stats": st.model_dump(exclude_none=True)}
        if decode.first_divergence:
            vals = [v for v in decode.first_divergence.values() if v is not None]
            res.extra["first_divergence"] = decode.first_divergence
            res.metrics["greedy_diverged"] = wilson(len(vals), len(decode.first_divergence))
            if vals:
                res.metrics["first_divergence_median"] = Interval(value=float(np.median(vals)), n=len(vals),
                                                                  method="median")
        if forced.topk_est:
            res.extra["topk_error_vs_exact"] = _topk_error_table(forced)
        if "forced" in have and headline == "decode":
            res.notes.append("kl_* figures: decode path (greedy generation, common prefix with the reference); "
                             "forced_* figures: teacher-forced prompt/prefill path (" + ",".join(sorted(forced.methods))
                             + "), which a decode-only quantization does not reach")
        elif headline == "forced":
            res.notes.append("kl_* figures: teacher-forced prompt/prefill path only (no decode-path logprobs); a "
                             "quantization applied only when decoding would not show here")
        profile = make_profile({p: (d.cat("kl"), d.cat("same")) for p, d in have.items()})
        res.extra["profile"] = profile.model_dump()
        res.extra["fingerprint"] = match(profile, library, suite_hash=suite.manifest.content_hash,
                                         model_sha256=ref_sha, served_model=ref_model).model_dump()
        results.append(res)
    return results
