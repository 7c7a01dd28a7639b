"""Read one suite's results into the headline differences the verdict judges, each on its own unit.

Why a reader of its own: what a headline difference *is* depends on the scoring that wrote it (per call or per
exchange, against a twin of the reference or against perfect agreement, an unbiased KL or a top-k lower bound), and
older summaries carry older figures. This module turns whatever the summary holds into one :class:`Reading` per
metric that says which sides of the margin the figure can speak to, and degrades, never guesses, when a field is
absent: a figure it cannot trust to prove equivalence is kept as evidence that can only show a difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verifier.records import Interval
from verifier.run.summary import EndpointSuiteResult, FingerprintEvidence, MetricEvidence
from verifier.run.verdict_policy import HEADLINE_METRICS, VerdictPolicy
from verifier.run.verdict_stats import Sides, widen_zero_spread, zero_width
from verifier.stats.intervals import newcombe_unpaired_diff

#: Headlines measured as a paired difference, candidate minus reference (scoring's ``comparisons``).
PAIRED = ("task_success", "trigger_f1", "argument_agreement", "schema_accuracy", "forced_call_success")
#: KL estimators whose interval covers the KL itself; anything else is only a lower bound.
UNBIASED_KL = frozenset({"exact", "sampled_k3"})
#: The scoring's test name for a floor-based headline (trigger F1, argument agreement) measured without reference
#: repeats: the difference is taken against a perfect 1, which a sampling reference does not reach itself.
NO_FLOOR_TEST = "none: no reference repeats"
FLOOR_METRICS = frozenset({"trigger_f1", "argument_agreement"})
NO_FLOOR_REASON = ("the reference's run-to-run floor was not measured (no reference repeats): judged against perfect "
                   "agreement, which can show the candidate close but never different")
#: The scoring's record of a reference floor built from response-cache copies (its second answers carrying the first
#: answers' response ids, :mod:`verifier.kinds.toolcall.headlines`): such a floor is not a measurement.
CACHED_FLOOR_KEY = "reference_floor_cache"
_UNITS = {"task_success": "scenarios", "trigger_f1": "cases", "argument_agreement": "calls both endpoints made",
          "schema_accuracy": "calls both endpoints made", "forced_call_success": "forced cases",
          "kl_mean": "prompts", "kl_topk_lower": "prompts"}


@dataclass
class Reading:
    """One headline figure and what it can show: ``sides`` of the margin, and whether it can prove either."""

    evidence: MetricEvidence
    sides: Sides = "both"
    can_be_inside: bool = True  # False: a lower bound, or no way to tell the figure is small enough
    can_be_outside: bool = True  # False: the figure cannot locate the difference beyond the margin
    given_p: float | None = None  # the scoring's own point-null p (exact / sign test), preferred when material
    why_open: str | None = None  # why neither side can be shown, in the headline's words (None: the usual wording)
    warning: str | None = None  # a caution the verdict must carry (Verdict.warnings)


def _kl_units(cand: EndpointSuiteResult, metric: str) -> tuple[int, str] | None:
    """KL's independent units and their name: the prompts (cases) of the path the figure came from, which are the
    clusters its interval resamples (several sequences sampled from one prompt are correlated through it). Summaries
    written before that counted sequences, each its own cluster: read as such."""
    own = cand.extra.get("kl_path" if metric == "kl_mean" else "kl_topk_path")
    for path in (own, cand.extra.get("headline_path")):
        if not isinstance(path, str):
            continue
        for unit in ("prompts", "sequences"):
            if f"{path}_{unit}" in cand.counts:
                return cand.counts[f"{path}_{unit}"], unit
    return None


def _units(cand: EndpointSuiteResult, metric: str, diff: Interval, given: int | None) -> int:
    """Independent units: the comparison's own count, else scenarios for agents, prompts for KL, else ``n``."""
    if given is not None:
        return given
    if metric == "task_success" and isinstance(cand.extra.get("scenarios"), dict):
        return len(cand.extra["scenarios"])
    if metric.startswith("kl_") and (kl := _kl_units(cand, metric)) is not None:
        return kl[0]
    return diff.n


def _paired(cand: EndpointSuiteResult, ref: EndpointSuiteResult | None, metric: str) -> Reading | None:
    value = cand.metrics.get(metric)
    comp = cand.comparisons.get(metric)
    if comp is not None and comp.difference.value is not None:
        diff = comp.difference
        reason = None
        unit = comp.unit or ("cases" if metric == "schema_accuracy" else _UNITS[metric])
        if metric == "schema_accuracy" and "call" not in unit:
            unit, reason = "cases (every call in the reply valid)", (
                "per exchange, not per call: a reply without a call counts as valid, so the margin is looser "
                "than it reads")
        if metric == "trigger_f1":
            basis = f"F1 against the reference minus the reference's F1 against itself ({comp.test or 'paired'})"
        elif metric == "argument_agreement":
            basis = f"agreement with the reference minus the reference's with itself ({comp.test or 'paired'})"
        else:
            basis = f"paired comparison ({comp.test or 'paired'})"
        no_floor = metric in FLOOR_METRICS and (comp.test or "").startswith(NO_FLOOR_TEST)
        if no_floor:  # a twin of a sampling reference falls short of 1 too: close can be shown, different not
            basis, reason = f"{HEADLINE_METRICS[metric]} against the reference minus 1 (its floor was not measured)", \
                NO_FLOOR_REASON
        ev = MetricEvidence(metric=metric, suite=cand.suite, value=value, difference=diff, basis=basis,
                            test=comp.test, unit=unit, reason=reason,
                            independent_units=_units(cand, metric, diff, comp.independent_units))
        if no_floor:
            return Reading(ev, sides="lower", can_be_outside=False)
        cache: Any = cand.extra.get(CACHED_FLOOR_KEY)
        if metric in FLOOR_METRICS and isinstance(cache, dict) and cache.get("not_a_measurement"):
            # the floor is the first answers served again: judged against it, a twin looks worse and a copy better
            warning = str(cache.get("warning") or "reference repeats served from a response cache")
            ev.reason = warning
            return Reading(ev, can_be_inside=False, can_be_outside=False, warning=warning,
                           why_open="not judged: the reference's floor came from a response cache")
        return Reading(ev, given_p=comp.p_value)
    if metric == "trigger_f1" and value is not None and value.value is not None:
        # Before the reference's own floor was measured: F1 against its decisions minus 1 (perfect agreement). A
        # twin's F1 is at most 1, so a shortfall shown small proves the lower side, and nothing can prove a difference.
        diff = Interval(value=value.value - 1, low=None if value.low is None else value.low - 1,
                        high=None if value.high is None else value.high - 1, n=value.n, method=value.method)
        ev = MetricEvidence(metric=metric, suite=cand.suite, value=value, difference=diff, unit="cases",
                            basis="F1 against the reference's decisions minus 1 (its floor was not measured)",
                            independent_units=_units(cand, metric, diff, None), reason=NO_FLOOR_REASON)
        return Reading(ev, sides="lower", can_be_outside=False)
    if metric == "forced_call_success" and value is not None and ref is not None:
        ref_iv = ref.metrics.get(metric)
        if ref_iv is None or ref_iv.value is None or value.value is None or not value.n or not ref_iv.n:
            return None
        k1, k2 = round(value.value * value.n), round(ref_iv.value * ref_iv.n)
        diff = newcombe_unpaired_diff(k2, ref_iv.n, k1, value.n)  # second minus first: candidate - reference
        if diff.value is None:
            return None
        from scipy.stats import fisher_exact  # here: scipy.stats costs ~0.5 s to import

        p = float(fisher_exact([[k1, value.n - k1], [k2, ref_iv.n - k2]]).pvalue)
        ev = MetricEvidence(metric=metric, suite=cand.suite, value=value, difference=diff, test="fisher_exact",
                            basis="unpaired difference of proportions (Newcombe interval)", unit="forced cases",
                            independent_units=diff.n)
        return Reading(ev, given_p=p)
    return None


def kl_estimator(method: str | None) -> str | None:
    """The unbiased estimator a ``kl_mean`` interval's method names (``exact_cluster_bootstrap_t`` is exact KL with a
    cluster bootstrap-t interval), or None when it names none: such a figure is read as a lower bound."""
    return next((m for m in sorted(UNBIASED_KL) if method is not None and (method == m or method.startswith(m + "_"))),
                None)


def _kl_unit(cand: EndpointSuiteResult, metric: str) -> str:
    kl = _kl_units(cand, metric)
    return "prompts" if kl is None else kl[1]


def _kl(cand: EndpointSuiteResult) -> Reading | None:
    kl = cand.metrics.get("kl_mean")
    lower = cand.metrics.get("kl_topk_lower")
    estimator = kl_estimator(kl.method) if kl is not None else None
    if kl is not None and kl.value is not None and estimator is not None:
        ev = MetricEvidence(metric="kl_mean", suite=cand.suite, value=kl, difference=kl, unit=_kl_unit(cand, "kl_mean"),
                            basis=f"KL(reference || candidate), {estimator} estimator",
                            independent_units=_units(cand, "kl_mean", kl, None))
        return Reading(ev, sides="upper")
    figure, metric, reason = lower, "kl_topk_lower", "a lower bound from top-k logprobs: can show a difference, " \
                                                     "never that the KL is small"
    if figure is None or figure.value is None:
        if kl is None or kl.value is None:
            return None
        figure, metric = kl, "kl_mean"
        reason = (f"estimator '{kl.method}' is not known to be unbiased (top-k or a decode path cut at the first "
                  f"divergence): read as a lower bound")
    ev = MetricEvidence(metric=metric, suite=cand.suite, value=figure, difference=figure, unit=_kl_unit(cand, metric),
                        basis="KL(reference || candidate), lower bound", bound="lower", reason=reason,
                        independent_units=_units(cand, metric, figure, None))
    tail = cand.metrics.get("kl_tail_mass")
    ev.tail_mass = None if tail is None else tail.value
    return Reading(ev, sides="upper", can_be_inside=False)


def read_suite(cand: EndpointSuiteResult, ref: EndpointSuiteResult | None, policy: VerdictPolicy) -> list[Reading]:
    """Every headline figure one suite measured for this candidate, with margin, minimum and zero-width handling."""
    readings = [r for m in PAIRED if (r := _paired(cand, ref, m)) is not None]
    kl = _kl(cand)
    if kl is not None:
        readings.append(kl)
    for r in readings:
        e = r.evidence
        e.margin = policy.margin(e.metric)
        e.min_units = policy.min_units.get(e.metric)
        e.material = e.metric in policy.material
        if zero_width(e.difference):
            units = e.independent_units or 0
            if e.metric in PAIRED and e.difference.value is not None:
                e.difference = widen_zero_spread(e.difference, units, policy.alpha)
                e.reason = ((e.reason + "; ") if e.reason else "") + (
                    f"zero-width interval widened to the exact bound over {units} {e.unit or 'units'}")
            else:
                e.reason = ((e.reason + "; ") if e.reason else "") + "zero-width interval: not proof of anything"
                r.can_be_inside = r.can_be_outside = False
    return readings


def read_fingerprint(cand: EndpointSuiteResult, policy: VerdictPolicy) -> FingerprintEvidence | None:
    """The KL fingerprint with its A/A-calibrated p-value when the scoring gives one (it joins the Holm family)."""
    fp: Any = cand.extra.get("fingerprint")
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
    p = fp.get("p_value")
    far = fp.get("false_alarm_rate")
    return FingerprintEvidence(
        suite=cand.suite, profile=best, distance=dist, reference_profile=policy.reference_profile,
        reference_distance=ref_d, margin=policy.fingerprint_margin, names_other=names_other,
        p_value=None if p is None else float(p), false_alarm_rate=None if far is None else float(far))
