"""The verdict's words: what moved and by how much, in the unit a reader acts on, with its interval.

Kept apart from the rule so the statistics can be read without the phrasing, and so every headline names its
denominator ("of 845 calls", "over 12 scenarios"), as the project's standards ask of every figure a user sees.
"""

from __future__ import annotations

from verifier.run.summary import FingerprintEvidence, MetricEvidence
from verifier.run.verdict_policy import HEADLINE_METRICS, PROPORTIONS

#: Said wherever "run about N more" is advised: a second look at the same run is not the test the p-values assume.
PEEKING_WARNING = ("adding cases to this run and judging it again is a second look, which raises the false-alarm "
                   "rate: run afresh at that size, or use the sequential (anytime-valid) mode")


def _pts(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:+.1f}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}"


def _ci(e: MetricEvidence) -> str:
    d = e.difference
    if d.low is None or d.high is None:
        return ""
    if e.metric in PROPORTIONS:
        return f" [{_pts(d.low)}, {_pts(d.high)}]"
    return f" [{d.low:.3g}, {d.high:.3g}]"


def _short_unit(e: MetricEvidence) -> str:
    """``calls``, ``scenarios``, ``sequences``, ``prompts`` or ``cases``: the first word of the metric's unit."""
    if e.metric == "task_success":
        return "scenarios"  # the independent units, whatever a trial-level unit says
    first = (e.unit or "").split(" ")[0]
    return first if first in ("calls", "scenarios", "sequences", "prompts") else "cases"


def _denominator(e: MetricEvidence) -> str:
    units = e.independent_units if e.metric == "task_success" else e.difference.n
    return f" of {units} {_short_unit(e)}" if units else ""


def describe(e: MetricEvidence) -> str:
    """What moved and by how much, e.g. ``arguments differ from the reference in 8.5 % [6.8, 10.5] of 845 calls``."""
    d = e.difference
    name = HEADLINE_METRICS[e.metric]
    v = e.value
    if e.metric == "argument_agreement" and v is not None and v.value is not None:
        ci = "" if v.low is None or v.high is None else f" [{_pct(1 - v.high)}, {_pct(1 - v.low)}]"
        against = "below perfect agreement" if e.basis.endswith("(its floor was not measured)") else \
            "against a twin of the reference"
        return (f"arguments differ from the reference in {_pct(1 - v.value)} %{ci} of {v.n} calls "
                f"({_pts(d.value)} pts{_ci(e)} {against})")
    if e.metric == "task_success":
        return f"{name} {_pts(d.value)} pts{_ci(e)} over {e.independent_units} scenarios"
    if e.metric == "trigger_f1":
        against = "below perfect agreement" if e.basis.endswith("(its floor was not measured)") else \
            "against a twin of the reference"
        return f"{name} {_pts(d.value)} pts{_ci(e)} {against}{_denominator(e)}"
    if e.metric in PROPORTIONS:
        per = " per call" if e.unit and e.unit.startswith("calls") else ""
        return f"{name}{per} {_pts(d.value)} pts{_ci(e)}{_denominator(e)}"
    if e.bound == "lower":
        tail = "" if e.tail_mass is None else f"; reference mass beyond its top-k {100 * e.tail_mass:.1f} %"
        return f"KL at least {d.value:.3g}{_ci(e)} nats/token (a lower bound{tail})"
    return f"{name} {d.value:.3g}{_ci(e)} nats/token ({d.method})"


def margin_text(e: MetricEvidence) -> str:
    if e.margin is None:
        return "no margin set"
    return f"±{100 * e.margin:g} pts" if e.metric in PROPORTIONS else f"< {e.margin:g} nats"


def not_testable_text(e: MetricEvidence) -> str:
    return (f"{HEADLINE_METRICS[e.metric]} not testable: {e.independent_units} {_short_unit(e)}, "
            f"needs at least {e.min_units}")


def fingerprint_text(fp: FingerprintEvidence | None) -> str:
    if fp is None or fp.profile == "no profiles":
        return ""
    text = f"KL profile closest to {fp.profile}"
    if fp.profile == "unknown":
        return text + " (no known profile within reach)"
    if fp.names_other and fp.p_value is not None:
        rate = "" if fp.false_alarm_rate is None else f", A/A false-alarm rate {100 * fp.false_alarm_rate:.1f} %"
        text += f" (p = {fp.p_value:.2g}{rate})"
    elif fp.names_other:
        text += " (not error-controlled: the fingerprint gives no calibrated p-value)"
    return text
