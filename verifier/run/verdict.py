"""One verdict per candidate: consistent, differs or inconclusive, from the summary's per-suite results.

Why a rule of its own: the per-suite tables give a reader twenty figures; the question they came with has one
answer. The rule (written out in docs/verdict.md) is statistical so that it can be trusted both ways:

* ``differs``: some headline comparison is significant after Holm correction across the endpoint's headline
  tests (family-wise error at most ``alpha``), or the KL fingerprint names a non-reference profile, ahead of the
  reference profile by at least the fingerprint margin.
* ``consistent``: every headline difference is *shown* inside its equivalence margin by two one-sided tests
  (an intersection-union test, so the overall error is at most ``alpha`` without correction), and the
  fingerprint (when measured) does not name another profile. A non-significant difference is never enough.
* ``inconclusive``: neither; with an estimate of how many more cases would settle it.

Everything is computed from figures already in the summary (intervals, paired comparisons, fingerprints), so a
verdict can be recomputed from any ``summary.json`` (``compute_verdicts``) without the records.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist

from pydantic import BaseModel, ConfigDict, Field

from verifier.records import Interval
from verifier.run.claims import contradiction_headline
from verifier.run.summary import (
    EndpointSuiteResult,
    FingerprintEvidence,
    MetricEvidence,
    RunSummary,
    Verdict,
)
from verifier.stats.intervals import newcombe_unpaired_diff
from verifier.stats.multiple import adjust_pvalues

__all__ = ["HEADLINE_METRICS", "VerdictPolicy", "compute_verdicts", "verdict_for"]

#: Headline metrics, in the order a headline names them. ``forced_call_success`` is included when a suite reports it.
HEADLINE_METRICS: dict[str, str] = {
    "trigger_f1": "trigger F1",
    "schema_accuracy": "schema accuracy",
    "forced_call_success": "forced-call success",
    "task_success": "agent task success",
    "kl_mean": "mean KL",
}
#: Proportions are shown as points ("pts"); KL in nats.
_PERCENT = {"trigger_f1", "schema_accuracy", "forced_call_success", "task_success"}
_NORMAL = NormalDist()  # the standard library's normal: scipy.stats (~0.5 s to import) only for Fisher's test
Z95 = _NORMAL.inv_cdf(0.975)


class VerdictPolicy(BaseModel):
    """``[verdict]`` in the policy file: error rate, equivalence margins, and what the gate does with each status."""

    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(0.05, gt=0, lt=0.5)
    #: Equivalence margins: proportions in absolute points (0.05 = 5 points), kl_mean in nats per token.
    margins: dict[str, float] = Field(default_factory=lambda: {
        "trigger_f1": 0.05, "schema_accuracy": 0.05, "forced_call_success": 0.05, "task_success": 0.10,
        "kl_mean": 0.01,
    })
    fingerprint_margin: float = Field(0.1, ge=0)  # decades of KL (RMS) the named profile must beat the reference's by
    reference_profile: str = "bf16"  # the profile library's name for the reference variant
    fail_on: list[str] = Field(default_factory=lambda: ["differs"])  # statuses that fail ``verifier gate``
    warn_on: list[str] = Field(default_factory=lambda: ["inconclusive"])  # statuses that warn


def _se(iv: Interval) -> float | None:
    """Standard error implied by a 95% interval (normal approximation), None without one."""
    if iv.low is None or iv.high is None:
        return None
    return max(0.0, (iv.high - iv.low) / (2 * Z95))


def _tost(d: float, se: float | None, margin: float, *, one_sided_upper: bool = False) -> float | None:
    """Two one-sided tests of |difference| < margin; returns the larger p (normal approximation on ``se``).

    ``one_sided_upper``: only "difference < margin" is tested (KL cannot be negative, F1 shortfall cannot be
    positive after the sign flip), so the other side holds by construction.
    """
    if se is None:
        return None
    if se == 0.0:
        return 0.0 if abs(d) < margin else 1.0
    p_upper = _NORMAL.cdf((d - margin) / se)  # H0: d >= margin
    if one_sided_upper:
        return p_upper
    p_lower = _NORMAL.cdf(-(d + margin) / se)  # H0: d <= -margin (the survival function, by symmetry)
    return max(p_upper, p_lower)


def _cases_to_settle(d: float, se: float | None, n: int, margin: float | None, alpha: float, k: int,
                     can_differ: bool) -> int | None:
    """More cases that would settle this metric if the observed difference and spread held (se ~ 1/sqrt(n))."""
    if se is None or se == 0.0 or n <= 0:
        return None
    needs: list[float] = []
    if margin is not None and abs(d) < margin:
        needs.append(n * (_NORMAL.inv_cdf(1 - alpha) * se / (margin - abs(d))) ** 2)
    if can_differ and d != 0.0:
        needs.append(n * (_NORMAL.inv_cdf(1 - alpha / (2 * max(k, 1))) * se / abs(d)) ** 2)
    if not needs:
        return None
    return max(1, math.ceil(min(needs) - n))


def _unpaired(cand: Interval, ref: Interval) -> tuple[Interval, float] | None:
    """Difference of two proportions measured on separate draws: Newcombe interval and Fisher's exact p."""
    if cand.value is None or ref.value is None or not cand.n or not ref.n:
        return None
    k1, k2 = round(cand.value * cand.n), round(ref.value * ref.n)
    diff = newcombe_unpaired_diff(k2, ref.n, k1, cand.n)  # second minus first: candidate - reference
    if diff.value is None:
        return None
    from scipy.stats import fisher_exact

    p = float(fisher_exact([[k1, cand.n - k1], [k2, ref.n - k2]]).pvalue)
    return diff, p


def _evidence(cand: EndpointSuiteResult, ref: EndpointSuiteResult | None,
              policy: VerdictPolicy) -> list[MetricEvidence]:
    """The headline metrics one suite measured for this candidate, each with its difference and tests."""
    out: list[MetricEvidence] = []
    for metric in HEADLINE_METRICS:
        value = cand.metrics.get(metric)
        margin = policy.margins.get(metric)
        if metric == "trigger_f1":
            if value is None or value.value is None:
                continue
            # F1 is agreement with the reference's own trigger decisions: 1 is the reference against itself.
            # Its interval always lies at or below 0 after the shift, so significance comes from the paired
            # McNemar test of trigger decisions (systematic over- or under-triggering), not from the F1 CI.
            diff = Interval(value=value.value - 1, low=None if value.low is None else value.low - 1,
                            high=None if value.high is None else value.high - 1, n=value.n, method=value.method)
            comp = cand.comparisons.get("trigger_rate")
            out.append(MetricEvidence(
                metric=metric, suite=cand.suite, value=value, difference=diff,
                basis="F1 against the reference's decisions minus 1 (its agreement with itself)",
                test=f"trigger rate, paired ({comp.test})" if comp is not None and comp.p_value is not None else None,
                p_value=comp.p_value if comp is not None else None, margin=margin,
                p_equivalence=None if margin is None or diff.value is None
                else _tost(-diff.value, _se(diff), margin, one_sided_upper=True),
            ))
        elif metric == "kl_mean":
            if value is None or value.value is None:
                continue
            # KL is zero for the reference against itself and positive otherwise; a KL above zero is not by itself
            # evidence of another model (a non-deterministic server has one too), so it only bounds equivalence.
            out.append(MetricEvidence(
                metric=metric, suite=cand.suite, value=value, difference=value, basis="KL(reference || candidate)",
                margin=margin,
                p_equivalence=None if margin is None else _tost(value.value, _se(value), margin, one_sided_upper=True),
            ))
        else:
            comp = cand.comparisons.get(metric)
            if comp is not None and comp.difference.value is not None:
                diff, p, test, basis = comp.difference, comp.p_value, comp.test, f"paired comparison ({comp.test})"
            else:
                ref_iv = ref.metrics.get(metric) if ref is not None else None
                if value is None or ref_iv is None:
                    continue
                unpaired = _unpaired(value, ref_iv)
                if unpaired is None:
                    continue
                diff, p = unpaired
                test, basis = "fisher_exact", "unpaired difference of proportions (Newcombe interval)"
            out.append(MetricEvidence(
                metric=metric, suite=cand.suite, value=value, difference=diff, basis=basis, test=test, p_value=p,
                margin=margin,
                p_equivalence=None if margin is None or diff.value is None else _tost(diff.value, _se(diff), margin),
            ))
    return out


def _fingerprint(cand: EndpointSuiteResult, policy: VerdictPolicy) -> FingerprintEvidence | None:
    fp = cand.extra.get("fingerprint")
    if not isinstance(fp, dict) or "verdict" not in fp:
        return None
    ranking = {str(name): float(d) for name, d in fp.get("ranking", [])}
    best = str(fp["verdict"])
    ref_d = ranking.get(policy.reference_profile)
    dist = fp.get("distance")
    names_other = (
        best not in ("unknown", "no profiles", policy.reference_profile)
        and dist is not None and ref_d is not None
        and ref_d - float(dist) >= policy.fingerprint_margin
        and policy.reference_profile not in fp.get("indistinguishable_from", [])
    )
    return FingerprintEvidence(suite=cand.suite, profile=best, distance=dist,
                               reference_profile=policy.reference_profile,
                               reference_distance=ref_d, margin=policy.fingerprint_margin, names_other=names_other)


def _pts(metric: str, v: float | None) -> str:
    if v is None:
        return "n/a"
    if metric in _PERCENT:
        return f"{100 * v:+.1f}"
    return f"{v:.3g}"


def describe(e: MetricEvidence) -> str:
    """``trigger F1 -6.2 pts [-8.1, -4.3]`` or ``mean KL 0.021 [0.018, 0.024] nats``."""
    d = e.difference
    unit = " pts" if e.metric in _PERCENT else " nats"
    ci = f" [{_pts(e.metric, d.low)}, {_pts(e.metric, d.high)}]" if d.low is not None and d.high is not None else ""
    return f"{HEADLINE_METRICS[e.metric]} {_pts(e.metric, d.value)}{unit}{ci}"


def _margin_text(e: MetricEvidence) -> str:
    if e.margin is None:
        return "no margin set"
    return f"±{100 * e.margin:g} pts" if e.metric in _PERCENT else f"< {e.margin:g} nats"


def verdict_for(endpoint: str, results: Iterable[EndpointSuiteResult], reference_results: Iterable[EndpointSuiteResult],
                reference: str, policy: VerdictPolicy | None = None) -> Verdict:
    """The verdict of one candidate from its per-suite results and the reference's (same suites)."""
    policy = policy or VerdictPolicy()
    refs = {r.suite: r for r in reference_results}
    evidence: list[MetricEvidence] = []
    fingerprints: list[FingerprintEvidence] = []
    for r in results:
        evidence += _evidence(r, refs.get(r.suite), policy)
        fp = _fingerprint(r, policy)
        if fp is not None:
            fingerprints.append(fp)
    tested = [e for e in evidence if e.p_value is not None]
    for e, adj in zip(tested, adjust_pvalues([float(e.p_value) for e in tested], "holm")):  # type: ignore[arg-type]
        e.p_holm = adj
        e.significant = adj <= policy.alpha
    for e in evidence:
        e.equivalent = e.p_equivalence is not None and e.p_equivalence <= policy.alpha
        if not e.significant and not e.equivalent:
            d = float(e.difference.value or 0.0)
            if e.metric == "trigger_f1":
                d = -d  # the shortfall from perfect agreement
            e.cases_to_settle = _cases_to_settle(d, _se(e.difference), e.difference.n, e.margin, policy.alpha,
                                                 len(tested),
                                                 can_differ=e.test is not None and e.metric != "trigger_f1")
    fingerprint = next((f for f in fingerprints if f.names_other), fingerprints[0] if fingerprints else None)
    significant = [e for e in evidence if e.significant]
    named = fingerprint is not None and fingerprint.names_other
    fp_text = ""
    if fingerprint is not None and fingerprint.profile not in ("no profiles",):
        fp_text = f"KL profile closest to {fingerprint.profile}" + ("" if named or fingerprint.profile != "unknown"
                                                                    else " (no known profile within reach)")
    if significant or named:
        parts = [describe(e) for e in significant]
        if named and fingerprint is not None:
            kl = next((e for e in evidence if e.metric == "kl_mean" and e.suite == fingerprint.suite), None)
            parts.append(fp_text + (f" ({describe(kl)})" if kl is not None else ""))
        return Verdict(endpoint=endpoint, reference=reference, status="differs", alpha=policy.alpha,
                       headline=f"{endpoint} differs from {reference}: " + "; ".join(parts),
                       evidence=evidence, fingerprint=fingerprint)
    fp_ok = fingerprint is None or fingerprint.profile in (policy.reference_profile, "no profiles")
    if evidence and all(e.equivalent for e in evidence) and fp_ok:
        parts = [f"{describe(e)} within {_margin_text(e)}" for e in evidence]
        if fp_text:
            parts.append(fp_text)
        return Verdict(endpoint=endpoint, reference=reference, status="consistent", alpha=policy.alpha,
                       headline=f"{endpoint} is consistent with {reference}: " + "; ".join(parts),
                       evidence=evidence, fingerprint=fingerprint)
    if not evidence:
        return Verdict(endpoint=endpoint, reference=reference, status="inconclusive", alpha=policy.alpha,
                       headline=f"{endpoint} vs {reference} is inconclusive: no headline metric was measured "
                                f"(run a toolcall, agent or logprob suite)",
                       evidence=evidence, fingerprint=fingerprint)
    open_ = [e for e in evidence if not e.equivalent]
    parts = [f"{describe(e)} not shown within {_margin_text(e)}" for e in open_]
    if not fp_ok and fp_text:
        parts.append(fp_text + " (not the reference's, but without margin)")
    needed = [e.cases_to_settle for e in open_ if e.cases_to_settle is not None]
    settle = max(needed) if needed and len(needed) == len(open_) else None
    stuck = [HEADLINE_METRICS[e.metric] for e in open_ if e.cases_to_settle is None]
    tail = (f"; about {settle} more cases per suite would likely settle it" if settle is not None
            else f"; more cases alone may not settle it ({', '.join(dict.fromkeys(stuck))}: at or beyond the margin "
                 f"without a significant difference)")
    return Verdict(endpoint=endpoint, reference=reference, status="inconclusive", alpha=policy.alpha,
                   headline=f"{endpoint} vs {reference} is inconclusive: " + "; ".join(parts) + tail,
                   evidence=evidence, fingerprint=fingerprint, cases_to_settle=settle)


def compute_verdicts(summary: RunSummary, policy: VerdictPolicy | None = None) -> dict[str, Verdict]:
    """A verdict for every candidate of the run (the reference is the yardstick and gets none)."""
    ref_results = [r for r in summary.results if r.endpoint == summary.reference]
    out: dict[str, Verdict] = {}
    for ep in summary.endpoints:
        if ep.name == summary.reference:
            continue
        mine = [r for r in summary.results if r.endpoint == ep.name]
        out[ep.name] = verdict_for(ep.name, mine, ref_results, summary.reference, policy)
        contradiction = contradiction_headline(ep.name, summary.claims.get(ep.name, []))
        if contradiction:  # a stated claim the run contradicts is named first (verifier/run/claims.py)
            out[ep.name].headline = f"{contradiction}. {out[ep.name].headline}"
    return out
