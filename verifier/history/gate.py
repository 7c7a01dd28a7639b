"""The CI gate: judge a run against a policy file, exit 0 pass / 1 fail / 2 error, write JUnit and Markdown.

Policy (TOML)::

    [thresholds]
    trigger_f1 = 0.73          # lower bound (the metric must be at least this)
    kl_mean_max = 0.05         # a name ending in _max is an upper bound on the metric before it (kl_mean)
    "pass^3" = 0.5             # names with ^ need quotes in TOML
    drift = false              # false: fail when drift is detected against the endpoint's history

    [gate]
    decision = "point"         # see below
    missing = "skip"           # a thresholded metric the run did not measure: "skip" | "warn" | "fail"
    endpoints = "candidates"   # judge "candidates" (default) or "all" endpoints
    fail_on_warn = false

    [drift]                    # verifier.history.drift.DriftSettings: alpha, method, window, min_history, metrics,
    exclude
    alpha = 0.05

    [verdict]                  # verifier.run.verdict.VerdictPolicy (docs/verdict.md); absent: the verdict is not gated
    alpha = 0.05
    fail_on = ["differs"]      # verdict statuses that fail the gate
    warn_on = ["inconclusive"]
    material = ["forced_call_success"]  # any significant difference counts, whatever its size
    [verdict.margins]          # margins: proportions in points (0.05 = 5 pts), kl_mean in nats
    schema_accuracy = 0.05
    [verdict.min_units]        # fewer independent units: the metric is "not testable"
    task_success = 10

What the gate judges (``decision``), and why the default is the point estimate:

* ``point`` (default): pass/fail by the point estimate; a pass whose 95% CI still reaches across the threshold
  is marked **warn** ("not settled at this n"). A CI bound alone would either let every small, noisy run pass
  (judging the optimistic bound) or fail a good endpoint whenever n is small (judging the pessimistic bound);
  the point estimate is the unbiased guess and the warn mark tells the reader when to add cases.
* ``ci_strict``: the endpoint must *show* it meets the bar: fail unless the pessimistic CI bound clears it.
* ``ci_lenient``: fail only on evidence of a problem: the optimistic CI bound is on the wrong side too.
"""

from __future__ import annotations

import re
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verifier.history.drift import DriftReport, DriftSettings
from verifier.records import Interval
from verifier.run.summary import RunSummary, Verdict
from verifier.run.verdict import HEADLINE_METRICS, VerdictPolicy, compute_verdicts

__all__ = [
    "DEFAULT_POLICY",
    "METRICS",
    "Check",
    "GateResult",
    "GateSettings",
    "MetricInfo",
    "Policy",
    "PolicyError",
    "Threshold",
    "evaluate",
    "is_known_metric",
    "load_policy",
    "metric_info",
    "parse_policy",
    "to_junit",
    "to_markdown",
]

Status = Literal["pass", "warn", "fail", "skip"]
_RANK: dict[Status, int] = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}


def _worst(statuses: Iterable[Status]) -> Status | None:
    """The most severe status (fail > warn > pass > skip), None when there is none."""
    return max(statuses, key=lambda s: _RANK[s], default=None)


@dataclass(frozen=True)
class MetricInfo:
    """How to read a metric: its label for people, unit, and which direction is better."""

    label: str
    higher_is_better: bool | None  # None: neither (e.g. a ratio whose ideal is 1 or 0 both ways)
    unit: str = ""  # "" plain number, "%" a proportion shown as percent, "s" seconds


#: The metric names of CONTRACTS.md ("Summary metric names"). ``pass^K`` is matched by pattern.
METRICS: dict[str, MetricInfo] = {
    "trigger_precision": MetricInfo("Trigger precision", True, "%"),
    "trigger_recall": MetricInfo("Trigger recall", True, "%"),
    "trigger_f1": MetricInfo("Trigger F1", True, "%"),
    "schema_accuracy": MetricInfo("Schema accuracy", True, "%"),
    "tool_name_agreement": MetricInfo("Tool-name agreement", True, "%"),
    "args_exact_agreement": MetricInfo("Arguments exact agreement", True, "%"),
    "args_bfcl_agreement": MetricInfo("Arguments agreement (BFCL)", True, "%"),
    "argument_agreement": MetricInfo("Argument agreement (per call)", True, "%"),
    "trigger_f1_floor": MetricInfo("Trigger F1 of the reference with itself", True, "%"),
    "argument_agreement_floor": MetricInfo("Argument agreement of the reference with itself", True, "%"),
    "reference_self_trigger_f1": MetricInfo("Trigger F1 of the reference with itself", True, "%"),
    "reference_self_argument_agreement": MetricInfo("Argument agreement of the reference with itself", True, "%"),
    "reference_repeat_differs": MetricInfo("Reference answers that differ when asked again", False, "%"),
    "latency_p50_s": MetricInfo("Latency p50", False, "s"),
    "latency_p95_s": MetricInfo("Latency p95", False, "s"),
    "latency_p99_s": MetricInfo("Latency p99", False, "s"),
    "ttft_p50_s": MetricInfo("Time to first token p50", False, "s"),
    "error_rate": MetricInfo("Error rate", False, "%"),
    "task_success": MetricInfo("Agent task success", True, "%"),
    "step_validity": MetricInfo("Step validity", True, "%"),
    "first_invalid_step_median": MetricInfo("First invalid step (median)", True),
    "trajectory_divergence_step_median": MetricInfo("Trajectory divergence step (median)", True),
    "kl_mean": MetricInfo("Mean KL", False),
    "kl_median": MetricInfo("Median KL", False),
    "kl_p99": MetricInfo("KL p99", False),
    "same_top": MetricInfo("Same top token", True, "%"),
    "delta_p_rms": MetricInfo("RMS Δp", False),
    "ln_ppl_ratio": MetricInfo("ln PPL ratio", None),
    "cache_hit_rate": MetricInfo("Cache hit rate", True, "%"),
    "cache_bound": MetricInfo("Cache hit bound", None, "%"),
    # produced by the scoring modules beyond the contract's list (additive): shown and gateable by name
    "trigger_rate": MetricInfo("Tool-call trigger rate", None, "%"),
    "k2vv_schema_accuracy": MetricInfo("Schema accuracy (K2VV rule)", True, "%"),
    "forced_call_success": MetricInfo("Forced-call success", True, "%"),
    "tokens_per_s": MetricInfo("Decode tokens per second", True),
    "latency_mean_s": MetricInfo("Latency mean", False, "s"),
}
_EXPECTED = "expected_"  # toolcall scoring's prefix for metrics against the suite's own labels
_EXPECTED_ONLY = {"tool_accuracy", "args_exact", "args_bfcl", "case_accuracy"}  # bases that exist only with it
_PASS_K = re.compile(r"^pass\^(\d+)$")


def metric_info(name: str) -> MetricInfo:
    """Display info for a metric name; unknown names (an additive contract change) still render plainly."""
    if name in METRICS:
        return METRICS[name]
    m = _PASS_K.match(name)
    if m:
        return MetricInfo(f"pass^{m.group(1)}", True, "%")
    if name.startswith(_EXPECTED):
        base = name[len(_EXPECTED):]
        info = metric_info(base) if is_known_metric(base) else MetricInfo(base.replace("_", " "), True, "%")
        return MetricInfo(f"{info.label} (vs suite labels)", info.higher_is_better, info.unit)
    return MetricInfo(name, None)


def is_known_metric(name: str) -> bool:
    if name.startswith(_EXPECTED):
        base = name[len(_EXPECTED):]
        return base in _EXPECTED_ONLY or is_known_metric(base)
    return name in METRICS or bool(_PASS_K.match(name))


class PolicyError(Exception):
    """A policy file that cannot be used; the message is one line naming the file and field."""


class Threshold(BaseModel):
    key: str  # as written in the policy, e.g. "kl_mean_max"
    metric: str  # the metric it bounds, e.g. "kl_mean"
    bound: float
    upper: bool  # True: metric must be <= bound

    @property
    def text(self) -> str:
        return f"{self.metric} {'<=' if self.upper else '>='} {self.bound:g}"


class GateSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["point", "ci_strict", "ci_lenient"] = "point"
    missing: Literal["skip", "warn", "fail"] = "skip"
    endpoints: Literal["candidates", "all"] = "candidates"
    fail_on_warn: bool = False


class Policy(BaseModel):
    thresholds: list[Threshold] = Field(default_factory=list)
    allow_drift: bool = True  # ``drift = false`` in [thresholds] sets this False
    gate: GateSettings = Field(default_factory=GateSettings)
    drift: DriftSettings = Field(default_factory=DriftSettings)
    verdict: VerdictPolicy | None = None  # None (no [verdict] table): verdicts are reported, not gated
    source: str = "<default>"


def parse_policy(data: dict[str, Any], source: str = "<policy>") -> Policy:
    """Validate a parsed TOML policy; every problem raises PolicyError naming ``source`` and the field."""
    unknown = set(data) - {"thresholds", "gate", "drift", "verdict"}
    if unknown:
        raise PolicyError(f"{source}: unknown table [{sorted(unknown)[0]}] "
                          "(expected [thresholds], [gate], [drift], [verdict])")
    raw = data.get("thresholds", {})
    if not isinstance(raw, dict):
        raise PolicyError(f"{source}: [thresholds] must be a table")
    thresholds: list[Threshold] = []
    allow_drift = True
    for key, val in raw.items():
        field = f"{source}: [thresholds].{key}"
        if key == "drift":
            if not isinstance(val, bool):
                raise PolicyError(f"{field}: must be true or false, got {val!r}")
            allow_drift = val
            continue
        upper = key.endswith("_max")
        metric = key[: -len("_max")] if upper else key
        if not is_known_metric(metric):
            known = ", ".join(sorted(METRICS))
            raise PolicyError(f"{field}: unknown metric {metric!r} (known: {known}, pass^K)")
        if isinstance(val, bool) or not isinstance(val, int | float):
            raise PolicyError(f"{field}: threshold must be a number, got {val!r}")
        thresholds.append(Threshold(key=key, metric=metric, bound=float(val), upper=upper))
    try:
        gate = GateSettings.model_validate(data.get("gate", {}))
    except ValidationError as exc:
        raise PolicyError(_pyd_error(source, "gate", exc)) from exc
    try:
        drift = DriftSettings.model_validate(data.get("drift", {}))
    except ValidationError as exc:
        raise PolicyError(_pyd_error(source, "drift", exc)) from exc
    verdict = _parse_verdict(data["verdict"], source) if "verdict" in data else None
    return Policy(thresholds=thresholds, allow_drift=allow_drift, gate=gate, drift=drift, verdict=verdict,
                  source=source)


_VERDICT_STATUSES = ("consistent", "differs", "inconclusive")


def _parse_verdict(raw: Any, source: str) -> VerdictPolicy:
    """``[verdict]``: margins must name headline metrics, statuses must be verdict statuses (one-line errors)."""
    if not isinstance(raw, dict):
        raise PolicyError(f"{source}: [verdict] must be a table")
    try:
        defaults = VerdictPolicy()
        vp = VerdictPolicy.model_validate({**raw, "margins": {**defaults.margins, **raw.get("margins", {})},
                                           "min_units": {**defaults.min_units, **raw.get("min_units", {})}})
    except ValidationError as exc:
        raise PolicyError(_pyd_error(source, "verdict", exc)) from exc
    for name, margin in vp.margins.items():
        if name not in HEADLINE_METRICS:
            raise PolicyError(f"{source}: [verdict.margins].{name}: not a headline metric "
                              f"(known: {', '.join(HEADLINE_METRICS)})")
        if margin <= 0:
            raise PolicyError(f"{source}: [verdict.margins].{name}: margin must be positive, got {margin!r}")
    for name, units in vp.min_units.items():
        if name not in HEADLINE_METRICS:
            raise PolicyError(f"{source}: [verdict.min_units].{name}: not a headline metric "
                              f"(known: {', '.join(HEADLINE_METRICS)})")
        if units < 1:
            raise PolicyError(f"{source}: [verdict.min_units].{name}: must be at least 1, got {units!r}")
    for name in vp.material:
        if name not in HEADLINE_METRICS:
            raise PolicyError(f"{source}: [verdict].material: {name!r} is not a headline metric "
                              f"(known: {', '.join(HEADLINE_METRICS)})")
    for key in ("fail_on", "warn_on"):
        for status in getattr(vp, key):
            if status not in _VERDICT_STATUSES:
                raise PolicyError(f"{source}: [verdict].{key}: unknown status {status!r} "
                                  f"(known: {', '.join(_VERDICT_STATUSES)})")
    return vp


def _pyd_error(source: str, table: str, exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{source}: [{table}].{loc}: {err['msg']}"


def load_policy(path: Path) -> Policy:
    """Read and validate a policy TOML file (errors name the file, line for syntax errors, and field)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{path}: not valid TOML: {exc}") from exc
    return parse_policy(data, str(path))


#: The default policy (identical to ``examples/policy.toml``; a test keeps them in step). One judge per figure: a
#: candidate is judged relative to the reference by its verdict (the verdict's equivalence margins, Holm-corrected
#: tests), never by an absolute line as well. Why no absolute thresholds by default: a schema accuracy of 98.6%
#: identical to the reference's was marked warn by a ">= 0.95" line its interval touched, beside a verdict that
#: said consistent. Absolute thresholds apply only when a policy file asks for them (the report labels them "abs.").
DEFAULT_POLICY = parse_policy(
    {
        "thresholds": {"drift": False},
        "verdict": {"alpha": 0.05, "fail_on": ["differs"], "warn_on": ["inconclusive"]},
    },
    "<default policy>",
)


class Check(BaseModel):
    """One endpoint x check: a threshold on one suite's metric, or the drift check."""

    endpoint: str
    name: str  # e.g. "trigger_f1 >= 0.73 [toolcall-core]" or "no drift"
    status: Status
    metric: str | None = None
    suite: str | None = None
    value: Interval | None = None
    threshold: Threshold | None = None
    message: str = ""


class GateResult(BaseModel):
    run_id: str
    policy: str
    decision: str
    checks: list[Check] = Field(default_factory=list)
    fail_on_warn: bool = False
    drift_statement: str | None = None

    @property
    def status(self) -> Status:
        worst = _worst(c.status for c in self.checks) or "pass"
        return "pass" if worst == "skip" else worst

    def endpoint_status(self, endpoint: str) -> Status | None:
        return _worst(c.status for c in self.checks if c.endpoint == endpoint and c.status != "skip")

    def for_cell(self, endpoint: str, metric: str, suite: str) -> Check | None:
        for c in self.checks:
            if c.endpoint == endpoint and c.metric == metric and c.suite == suite:
                return c
        return None

    @property
    def exit_code(self) -> int:
        s = self.status
        return 1 if s == "fail" or (s == "warn" and self.fail_on_warn) else 0


def _fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{0.0 if abs(v) < 1e-12 else v:.4g}"  # interval code leaves float dust such as 1.4e-17 at bounds


def judge(iv: Interval, th: Threshold, decision: str) -> tuple[Status, str]:
    """Pass/warn/fail for one interval against one threshold under the chosen decision rule."""
    assert iv.value is not None
    ok = (lambda x: x <= th.bound) if th.upper else (lambda x: x >= th.bound)
    # pessimistic/optimistic CI ends with respect to this threshold's direction
    pess = iv.high if th.upper else iv.low
    opti = iv.low if th.upper else iv.high
    ci = f"{_fmt(iv.value)} [{_fmt(iv.low)}, {_fmt(iv.high)}] n={iv.n}"
    if decision == "ci_strict":
        if pess is None:
            return "fail", f"{ci}: no CI, so the bound cannot be shown ({th.text})"
        return ("pass", f"{ci}: CI clears {th.text}") if ok(pess) else ("fail", f"{ci}: CI does not clear {th.text}")
    if decision == "ci_lenient":
        if ok(iv.value) and (pess is None or ok(pess)):
            return "pass", f"{ci}: meets {th.text}"
        if opti is not None and not ok(opti):
            return "fail", f"{ci}: whole CI misses {th.text}"
        if opti is None and not ok(iv.value):
            return "fail", f"{ci}: misses {th.text} (no CI)"
        return "warn", f"{ci}: CI reaches across {th.text}"
    if not ok(iv.value):
        return "fail", f"{ci}: misses {th.text}"
    if pess is not None and not ok(pess):
        return "warn", f"{ci}: meets {th.text}, but the CI reaches across it (add cases to settle)"
    return "pass", f"{ci}: meets {th.text}"


def evaluate(summary: RunSummary, policy: Policy, drift: DriftReport | None = None) -> GateResult:
    """Every endpoint x threshold (x suite that measured it), plus one drift check per endpoint if gated."""
    result = GateResult(
        run_id=summary.run_id,
        policy=policy.source,
        decision=policy.gate.decision,
        fail_on_warn=policy.gate.fail_on_warn,
        drift_statement=drift.statement if drift is not None else None,
    )
    endpoints = [e for e in summary.endpoints if policy.gate.endpoints == "all" or not e.is_reference]
    verdicts: dict[str, Verdict] | None = None  # recomputed under this policy's margins (docs/verdict.md)
    for ep in endpoints:
        results = [r for r in summary.results if r.endpoint == ep.name]
        for th in policy.thresholds:
            measured = [(r.suite, r.metrics[th.metric]) for r in results if th.metric in r.metrics]
            measured = [(s, iv) for s, iv in measured if iv.value is not None]
            if not measured:
                result.checks.append(
                    Check(endpoint=ep.name, name=th.text, metric=th.metric, threshold=th,
                          status=policy.gate.missing, message="not measured in this run")
                )
                continue
            for suite, iv in measured:
                status, msg = judge(iv, th, policy.gate.decision)
                result.checks.append(
                    Check(endpoint=ep.name, name=f"{th.text} [{suite}]", metric=th.metric, suite=suite,
                          value=iv, threshold=th, status=status, message=msg)
                )
        if not policy.allow_drift:
            result.checks.append(_drift_check(ep.name, drift))
        if policy.verdict is not None and not ep.is_reference and ep.name != summary.reference:
            verdicts = verdicts if verdicts is not None else compute_verdicts(summary, policy.verdict)
            if ep.name in verdicts:
                result.checks.append(_verdict_check(verdicts[ep.name], policy.verdict))
    return result


def _verdict_check(v: Verdict, vp: VerdictPolicy) -> Check:
    status: Status = "fail" if v.status in vp.fail_on else "warn" if v.status in vp.warn_on else "pass"
    return Check(endpoint=v.endpoint, name="verdict", status=status, message=f"{v.status}: {v.headline}")


def _drift_check(endpoint: str, drift: DriftReport | None) -> Check:
    if drift is None:
        return Check(endpoint=endpoint, name="no drift", status="warn", message="no history database: drift not tested")
    mine = drift.for_endpoint(endpoint)
    flagged = [t for t in mine if t.drift]
    if flagged:
        parts = [
            f"{t.suite}/{t.metric}{' (vs reference)' if t.basis == 'vs_reference' else ''}: "
            f"{t.current:.4g} vs history {t.history_mean:.4g}±{t.sd_used:.2g} (adj. p={t.p_adjusted:.2g})"
            for t in flagged
        ]
        return Check(endpoint=endpoint, name="no drift", status="fail", message="drift: " + "; ".join(parts))
    if not mine:
        return Check(endpoint=endpoint, name="no drift", status="warn",
                     message="drift not tested: not enough comparable history yet")
    return Check(endpoint=endpoint, name="no drift", status="pass",
                 message=f"{len(mine)} series tested, none changed")


def to_junit(result: GateResult) -> str:
    """JUnit XML, one testcase per endpoint x check (classname = endpoint), for CI test-report widgets."""
    fails = sum(c.status == "fail" for c in result.checks)
    skips = sum(c.status == "skip" for c in result.checks)
    suites = ET.Element("testsuites", name="verifier gate", tests=str(len(result.checks)), failures=str(fails))
    ts = ET.SubElement(
        suites, "testsuite", name=f"verifier gate {result.run_id}", tests=str(len(result.checks)),
        failures=str(fails), errors="0", skipped=str(skips),
    )
    props = ET.SubElement(ts, "properties")
    ET.SubElement(props, "property", name="policy", value=result.policy)
    ET.SubElement(props, "property", name="decision", value=result.decision)
    for c in result.checks:
        tc = ET.SubElement(ts, "testcase", classname=c.endpoint, name=c.name, time="0")
        if c.status == "fail":
            ET.SubElement(tc, "failure", message=c.message, type="threshold" if c.threshold else c.name
                          if c.name == "verdict" else "drift").text = c.message
        elif c.status == "skip":
            ET.SubElement(tc, "skipped", message=c.message)
        elif c.status == "warn":
            ET.SubElement(tc, "system-out").text = f"WARN: {c.message}"
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


_MD_MARK = {"pass": "✅ pass", "warn": "⚠️ warn", "fail": "❌ fail", "skip": "➖ skip"}


def _md_cell(text: str) -> str:
    """Neutralise Markdown/HTML in a table cell (endpoint names come from users, not from us)."""
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("`", "\\`").replace("*", "\\*").replace("_", "\\_")


def to_markdown(result: GateResult) -> str:
    """A Markdown summary for ``$GITHUB_STEP_SUMMARY`` or a PR comment."""
    lines = [
        f"## verifier gate: {_MD_MARK[result.status]}",
        "",
        f"Run {_md_cell(result.run_id)}, policy {_md_cell(result.policy)}, decision rule `{result.decision}`"
        " (95% CIs; *warn* = the CI reaches across the threshold).",
        "",
        "| endpoint | check | result | detail |",
        "|---|---|---|---|",
    ]
    for c in result.checks:
        lines.append(f"| {_md_cell(c.endpoint)} | {_md_cell(c.name)} | {_MD_MARK[c.status]} | {_md_cell(c.message)} |")
    if not result.checks:
        lines.append("| (none) | no checks in policy | ➖ skip | |")
    if result.drift_statement:
        lines += ["", f"Drift: {_md_cell(result.drift_statement)}"]
    counts = {s: sum(c.status == s for c in result.checks) for s in ("pass", "warn", "fail", "skip")}
    lines += ["", " · ".join(f"{k}: {v}" for k, v in counts.items()), ""]
    return "\n".join(lines)
