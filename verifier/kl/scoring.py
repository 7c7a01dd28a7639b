"""Score logprob records: per candidate, KL statistics for the forced and decode paths, method, fingerprint.

Works from ``records.jsonl`` alone (exact-distribution KL was computed at run time and stored in the
candidate's record), so a finished run can be re-scored offline.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verifier.kl.align import Interner, LogprobFormatError, TokenTrack, align_tracks, common_prefix
from verifier.kl.estimator import topk_kl
from verifier.kl.fingerprint import load_library, make_profile, match, reference_model
from verifier.kl.probe import ProbeResult
from verifier.kl.stats import KLStats, kl_cdf_series, kl_statistics
from verifier.records import ExchangeRecord, Interval
from verifier.stats import wilson
from verifier.summary_model import EndpointSuiteResult

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


def _choice(rec: ExchangeRecord) -> dict[str, Any]:
    choices = (rec.response or {}).get("choices") or [{}]
    return choices[0] if isinstance(choices[0], dict) else {}


def _gen_track(rec: ExchangeRecord) -> TokenTrack:
    from verifier.kl.align import parse_chat_logprobs, parse_legacy_logprobs

    if rec.extra.get("api") == "completions":
        return parse_legacy_logprobs(_choice(rec).get("logprobs"))
    return parse_chat_logprobs(rec.logprobs)


def _topk_path(data: PathData, case: str, method: str, ref: TokenTrack, cand: TokenTrack, start: int) -> None:
    al = align_tracks(ref, cand, start_offset=start, interner=Interner())
    data.misaligned += al.misaligned
    if al.compared == 0:
        return
    est = topk_kl(al.ref, al.cand)
    data.add(case, method, est.kl, al.ref_token_lp, al.cand_token_lp, al.same_top, est.lower)


def _forced(recs: dict[tuple[str, str, str], ExchangeRecord], case_ids: list[str], ref_ep: str, ep: str) -> PathData:
    from verifier.kl.suite import _forced_track

    data = PathData()
    for cid in case_ids:
        ce = recs.get((ep, cid, "forced_exact"))
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
            if r is None or c is None or not (r.ok and c.ok):
                continue
            cont = r.extra.get("continuation", "")
            try:
                rt, start = _forced_track(r, cont)
                ct, _ = _forced_track(c, cont)
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
        if r is None or c is None or not (r.ok and c.ok):
            continue
        try:
            rt, ct = _gen_track(r), _gen_track(c)
        except LogprobFormatError:
            continue
        m = common_prefix(rt, ct)
        data.first_divergence[cid] = m if m < min(len(rt.positions), len(ct.positions)) else None
        _topk_path(data, cid, r.extra.get("method", "generate"), TokenTrack(rt.positions[:m]), TokenTrack(ct.positions[:m]), 0)
    return data


def _no_logprobs_note(probe: ProbeResult | None) -> str:
    if probe is None:
        return "no logprobs: the endpoint was not probed"
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
    from verifier.kl.fingerprint import checkpoint_sha256

    for r in records:
        if r.endpoint == reference and isinstance(r.response, dict) and r.response.get("model") == "verifier-tiny":
            try:
                return checkpoint_sha256("tiny")
            except ImportError:
                return None
    return None


def score_logprob(suite: Any, records: list[ExchangeRecord], reference: str,
                  endpoints: list[str]) -> list[EndpointSuiteResult]:
    name = suite.manifest.name
    recs = {(r.endpoint, r.case_id, r.variant or ""): r for r in records if r.kind == "logprob"}
    case_ids = [c.id for c in suite.cases]
    probes = {ep: ProbeResult.model_validate(r.extra["probe"]) for (ep, cid, v), r in recs.items()
              if v == "probe" and "probe" in r.extra}
    try:
        from pathlib import Path

        from verifier.kl.fingerprint import PROFILES_FILE

        library = load_library(name, Path(suite.profiles_path) if getattr(suite, 'profiles_path', None) else PROFILES_FILE)
    except ValueError:
        library = None
    ref_sha = _reference_sha(records, reference)
    ref_model = reference_model(records, reference)
    results: list[EndpointSuiteResult] = []
    for ep in endpoints:
        probe = probes.get(ep)
        res = EndpointSuiteResult(endpoint=ep, suite=name, kind="logprob", is_reference=ep == reference)
        if probe is not None:
            res.extra["probe"] = {m: p.model_dump(exclude_none=True) for m, p in probe.methods.items()}
        if ep == reference:
            res.notes.append("reference: its greedy continuation is what every endpoint is forced on")
            results.append(res)
            continue
        forced, decode = _forced(recs, case_ids, reference, ep), _decode(recs, case_ids, reference, ep)
        paths = {"forced": forced, "decode": decode}
        have = {k: v for k, v in paths.items() if v.cases}
        if not have:
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
            res.series.append(kl_cdf_series(data.cat("kl"), f"KL CDF ({path}: {res.extra['method'] if path == headline else ','.join(sorted(data.methods))})"))
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
