"""Render ``run_dir/report.html`` (one self-contained, offline file) from a run folder.

Inputs: ``summary.json`` (RunSummary, required), ``manifest.json`` (optional: versions, settings) and
``records.jsonl`` (optional: latency distributions). Output: ``report.html`` plus ``disclosure-<endpoint>.json``.

Safety: every value goes through jinja2 autoescaping; the only unescaped inserts are our own SVG charts and our
own script, and a Content-Security-Policy allows nothing else (no network, no other script, no inline event
handlers), so model output that contains markup is shown as text and can never run.
"""

from __future__ import annotations

import base64
import hashlib
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from pydantic import BaseModel, Field

from reports import charts
from reports.chart_worker import ChartDrawer, ChartJob
from reports.cost_view import cost_view
from reports.disclosure import DisclosureCard, build_cards, fingerprint_text, write_cards
from verifier import history as history_store
from verifier.history.drift import DriftReport, detect_drift
from verifier.history.gate import DEFAULT_POLICY, Check, GateResult, Policy, evaluate, metric_info
from verifier.http.redaction import public_url
from verifier.records import ExchangeRecord, Interval
from verifier.run.store import RecordStore, RunManifest
from verifier.run.summary import EndpointSuiteResult, RunSummary, Series, Verdict
from verifier.run.verdict import VerdictPolicy, compute_verdicts

if TYPE_CHECKING:
    from verifier.history import DbArg

__all__ = ["VERDICT_COLUMNS", "render_report", "render_html"]


#: The verdict table's columns: (metric or "pass^k", heading). pass^k = the largest k the agent suite reported.
VERDICT_COLUMNS: list[tuple[str, str]] = [
    ("trigger_f1", "Trigger F1"),
    ("schema_accuracy", "Schema accuracy"),
    ("forced_call_success", "Forced-call success"),
    ("task_success", "Agent success"),
    ("pass^k", "Agent pass^k"),
    ("kl_mean", "Mean KL"),
    ("cache_hit_rate", "Cache hit rate"),
    ("latency_p50_s", "Latency p50"),
]
#: Disagreements shown in the page per endpoint x suite; the rest stay in summary.json and records.jsonl (the count
#: and a filter to find them are stated). Why so few: a 2,000-case run must stay a page that opens in two seconds.
MAX_DISAGREEMENTS = 40
NOT_MEASURED = "not measured"
#: Status marks of the headlines: a symbol and a word, so colour is never the only cue.
VERDICT_MARKS = {"consistent": "✓ consistent", "differs": "✗ differs", "inconclusive": "? inconclusive"}

#: Short definitions for the glossary; metric names in the page link here.
GLOSSARY: dict[str, str] = {
    "trigger_f1": "F1 of the candidate's decision to call a tool (finish_reason tool_calls), taking the reference's "
                  "decision on the same case as the truth. 100% = it calls tools exactly when the reference does.",
    "trigger_precision": "Of the cases where the candidate called a tool, the share where the reference did too.",
    "trigger_recall": "Of the cases where the reference called a tool, the share where the candidate did too.",
    "trigger_rate": "Share of successful replies that call a tool.",
    "schema_accuracy": "Share of tool calls whose arguments parse as JSON and validate against the tool's JSON Schema.",
    "forced_call_success": "Share of cases that force a tool (tool_choice) where the reply is a valid call of it.",
    "k2vv_schema_accuracy": "K2-Vendor-Verifier's figure: of replies with finish_reason tool_calls, the share whose "
                            "every call is valid.",
    "tool_name_agreement": "Where both called tools: the same tool names as the reference.",
    "args_exact_agreement": "Where both called the same tools: identical arguments.",
    "args_bfcl_agreement": "Where both called the same tools: arguments equal under BFCL's AST-style rules.",
    "argument_agreement": "Per call both endpoints made (same position, same tool): identical arguments. Compared "
                          "with the reference's agreement with itself (trigger_f1 likewise).",
    "reference_repeat_differs": "Share of the cases the reference answered twice whose two answers differ: above 0, "
                                "it samples, and a twin of it cannot agree with it perfectly either.",
    "error_rate": "Share of requests that failed after retries (HTTP error, timeout, malformed reply).",
    "latency_p50_s": "Median total request latency of successful requests, seconds.",
    "task_success": "Share of long-horizon agent trials whose final environment state passes the scenario's check.",
    "pass^k": "Share of scenarios solved in all k repeated trials.",
    "step_validity": "Share of agent steps with a valid tool call.",
    "kl_mean": "Mean per-token KL(reference || candidate), nats (lower = closer): exact from full distributions, "
               "else the sampled-token k3 estimate on continuations sampled from the reference; never from top-k.",
    "kl_topk_lower": "Lower bound on mean per-token KL from top-k logprobs (top-k misses the tail: the true KL can "
                     "be several times higher).",
    "kl_tail_mass": "Reference's probability mass outside its top-k logprobs: what a top-k KL bound cannot see.",
    "same_top": "Share of positions where the candidate's most likely token is the reference's.",
    "cache_hit_rate": "Cached prompt tokens over cacheable prompt tokens (first request of each session excluded).",
    "fingerprint": "The closest calibrated KL profile (bf16, fp8-kv, int4-decode, ...): which precision variant the "
                   "candidate's KL distribution looks like.",
    "consistent": ("Every headline difference shown inside its equivalence margin (two one-sided tests); "
                   "see docs/verdict.md."),
    "differs": "A headline difference significant after Holm correction, or a fingerprint naming another variant with "
               "margin.",
    "inconclusive": "Neither shown: more cases needed (the headline says about how many).",
}


class Cell(BaseModel):
    """One figure as shown: text for value, CI and n, plus the policy mark when a threshold applies."""

    metric: str
    suite: str | None = None
    value: str = NOT_MEASURED
    ci: str = ""
    n: int | None = None
    measured: bool = False
    status: str | None = None
    message: str = ""


class VerdictRow(BaseModel):
    """One endpoint's verdict-table figures (the table is drawn pivoted: a row per metric, a column per endpoint)."""

    endpoint: str
    model: str | None
    is_reference: bool
    status: str | None
    cells: list[list[Cell]]  # one list per column (several suites may measure the same metric)
    verdict: Verdict | None = None


class Headline(BaseModel):
    endpoint: str
    status: str  # consistent / differs / inconclusive / reference
    mark: str
    text: str


class MetricRow(BaseModel):
    metric: str
    label: str
    cells: list[Cell]  # one per endpoint


class ComparisonRow(BaseModel):
    endpoint: str
    metric: str
    diff: str
    ci: str
    n: int
    p_value: str
    test: str


class Chart(BaseModel):
    id: str
    title: str
    svg: str
    caption: str = ""


class ChartJobs:
    """The charts of one report: drawn by a :class:`ChartDrawer` (perhaps in its worker process while the rest
    of the page is built), their SVG filled in by :meth:`collect` before the template renders."""

    def __init__(self, drawer: ChartDrawer) -> None:
        self._drawer = drawer
        self._jobs: list[tuple[Chart, ChartJob]] = []

    def chart(self, id: str, title: str, caption: str, draw: Any, *args: Any) -> Chart:
        chart = Chart(id=id, title=title, svg="", caption=caption)
        self._jobs.append((chart, self._drawer.submit(draw, *args)))
        return chart

    def collect(self) -> None:
        for chart, job in self._jobs:
            chart.svg = job.result()


class DisagreementView(BaseModel):
    endpoint: str
    suite: str
    case_id: str
    kind: str
    reference: str | None
    candidate: str | None
    request: str | None
    detail: str | None


class Collapsed(BaseModel):
    """A family of metrics shown as one line because every figure in it is zero or not measured."""

    family: str
    metrics: list[str]
    text: str


class DisagreementCount(BaseModel):
    endpoint: str
    total: int
    shown: int


class SuiteSection(BaseModel):
    name: str
    kind: str
    version: str
    content_hash: str
    case_count: int
    endpoints: list[str]
    metric_rows: list[MetricRow]
    comparisons: list[ComparisonRow]
    charts: list[Chart]
    notes: list[tuple[str, str]]
    counts: list[tuple[str, str, int]]
    disagreement_total: int
    disagreements_shown: int
    collapsed: list[Collapsed] = Field(default_factory=list)
    sentences: list[str] = Field(default_factory=list)  # figures a chart would not show better
    disagreement_counts: list[DisagreementCount] = Field(default_factory=list)


def fmt_value(metric: str, v: float | None) -> str:
    if v is None:
        return NOT_MEASURED
    unit = metric_info(metric).unit
    if unit == "%":
        return f"{100 * v:.1f}%"
    if unit == "s":
        return f"{v:.3f} s"
    return f"{v:.4g}"


def make_cell(metric: str, suite: str | None, iv: Interval | None, check: Check | None = None) -> Cell:
    if iv is None or iv.value is None:
        return Cell(metric=metric, suite=suite)
    has_ci = iv.low is not None and iv.high is not None
    ci = f"[{fmt_value(metric, iv.low)}, {fmt_value(metric, iv.high)}]" if has_ci else "CI not computed"
    return Cell(metric=metric, suite=suite, value=fmt_value(metric, iv.value), ci=ci, n=iv.n, measured=True,
                status=check.status if check else None, message=check.message if check else "")


def _pass_k(results: list[EndpointSuiteResult]) -> list[tuple[str, str, Interval]]:
    out = []
    for r in results:
        ks = [int(m.split("^", 1)[1]) for m in r.metrics if m.startswith("pass^") and m.split("^", 1)[1].isdigit()]
        if ks:
            name = f"pass^{max(ks)}"
            out.append((name, r.suite, r.metrics[name]))
    return out


def headlines(summary: RunSummary, verdicts: dict[str, Verdict]) -> list[Headline]:
    """One line per endpoint, reference first, for the top of the page."""
    out = [Headline(endpoint=summary.reference, status="reference", mark="reference",
                    text=f"{summary.reference} is the reference: every other endpoint is measured against it.")]
    for ep in summary.endpoints:
        v = verdicts.get(ep.name)
        if ep.name == summary.reference:
            continue
        if v is None:
            out.append(Headline(endpoint=ep.name, status="inconclusive", mark=VERDICT_MARKS["inconclusive"],
                                text=f"{ep.name}: no verdict was computed."))
        else:
            out.append(Headline(endpoint=ep.name, status=v.status, mark=VERDICT_MARKS[v.status], text=v.headline))
    return out


def verdict_rows(summary: RunSummary, gate: GateResult, verdicts: dict[str, Verdict] | None = None) -> list[VerdictRow]:
    rows = []
    for ep in summary.endpoints:
        results = [r for r in summary.results if r.endpoint == ep.name]
        cols: list[list[Cell]] = []
        for metric, _ in VERDICT_COLUMNS:
            found = _pass_k(results) if metric == "pass^k" else [
                (metric, r.suite, r.metrics[metric]) for r in results if metric in r.metrics
            ]
            cells = [make_cell(m, s, iv, gate.for_cell(ep.name, m, s)) for m, s, iv in found]
            cols.append([c for c in cells if c.measured] or [Cell(metric=metric)])
        rows.append(VerdictRow(endpoint=ep.name, model=ep.model, is_reference=ep.is_reference
                               or ep.name == summary.reference,
                               status=gate.endpoint_status(ep.name), cells=cols, verdict=(verdicts or {}).get(ep.name)))
    rows.sort(key=lambda r: not r.is_reference)
    return rows


def _latencies(records: list[ExchangeRecord], suite: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.suite == suite and r.latency_s is not None and r.ok:
            out[r.endpoint].append(r.latency_s)
    return dict(out)


def _ordered(endpoints: list[str], reference: str) -> list[str]:
    return sorted(endpoints, key=lambda e: (e != reference, endpoints.index(e)))


def _colours(summary: RunSummary) -> dict[str, str]:
    return charts.colour_map(_ordered([e.name for e in summary.endpoints], summary.reference))


def suite_section(summary: RunSummary, suite_idx: int, records: list[ExchangeRecord], gate: GateResult,
                  jobs: ChartJobs) -> SuiteSection:
    manifest = summary.suites[suite_idx]
    results = [r for r in summary.results if r.suite == manifest.name]
    endpoints = _ordered([r.endpoint for r in results], summary.reference)
    by_ep = {r.endpoint: r for r in results}
    metrics = list(dict.fromkeys(m for e in endpoints for m in by_ep[e].metrics))
    all_rows = [
        MetricRow(metric=m, label=metric_info(m).label,
                  cells=[make_cell(m, manifest.name, by_ep[e].metrics.get(m), gate.for_cell(e, m, manifest.name))
                         for e in endpoints])
        for m in metrics
    ]
    metric_rows, collapsed = _collapse_families(all_rows,
                                                {m: [by_ep[e].metrics.get(m) for e in endpoints] for m in metrics})
    comparisons = []
    for e in endpoints:
        for key, c in by_ep[e].comparisons.items():
            d = c.difference
            name = c.metric or key
            diff_unit = metric_info(name).unit
            fmt = (lambda v: "n/a" if v is None else f"{100 * v:+.1f} pts") if diff_unit == "%" else (
                lambda v: "n/a" if v is None else f"{v:+.4g}")
            comparisons.append(ComparisonRow(
                endpoint=e, metric=name, diff=fmt(d.value),
                ci=f"[{fmt(d.low)}, {fmt(d.high)}]" if d.low is not None else "CI not computed", n=d.n,
                p_value="n/a" if c.p_value is None else f"{c.p_value:.3g}", test=c.test or "",
            ))
    slug = f"s{suite_idx}"
    chart_list: list[Chart] = []
    colours = _colours(summary)
    rate_rows = [(m, e, by_ep[e].metrics[m]) for m in metrics for e in endpoints
                 if m in by_ep[e].metrics and metric_info(m).unit == "%" and by_ep[e].metrics[m].value is not None]
    # rates against the reference first; rates against the suite's own labels (expected_*) in a chart of their own
    sentences: list[str] = []
    for suffix, title, rows_ in (
        ("rates", "Rates with 95% confidence intervals", [r for r in rate_rows if not r[0].startswith("expected_")]),
        ("labels", "Rates against the suite's own labels, 95% CIs",
         [r for r in rate_rows if r[0].startswith("expected_")]),
    ):
        if len(rows_) == 1:  # one dot on an axis says less than the table row it repeats
            continue
        if rows_:
            chart_list.append(jobs.chart(f"{slug}-{suffix}", title, "Dot = estimate, bar = 95% CI; n = denominator.",
                                         charts.rates_chart, rows_, f"{slug}-{suffix}", colours))
    series_names = list(dict.fromkeys(s.name for e in endpoints for s in by_ep[e].series if s.x))
    for j, name in enumerate(series_names):
        per: dict[str, Series] = {}
        for e in endpoints:
            for s in by_ep[e].series:
                if s.name == name and s.x:
                    per[e] = s
        cid = f"{slug}-series{j}"
        if not _informative(per):
            sentences.append(_series_sentence(name, per))
            continue
        chart_list.append(jobs.chart(cid, charts.series_title(name),
                                     "Shaded band = 95% CI where the scoring code provided one; dashed = an "
                                     "upper line named on the y axis (e.g. the cache bound).",
                                     charts.series_chart, name, per, cid, colours))
    lat = _latencies(records, manifest.name)
    if any(lat.values()) and not any(len(set(v)) >= 5 for v in lat.values()):
        sentences.append("Latency: " + "; ".join(
            f"{e} {', '.join(f'{x:.3f} s' for x in sorted(v))}" for e, v in lat.items() if v)
            + " (too few requests for a distribution chart).")
    elif any(lat.values()):
        lat = {e: lat[e] for e in _ordered(list(lat), summary.reference)}
        chart_list.append(jobs.chart(f"{slug}-latency", "Latency distribution",
                                     "Empirical CDF of successful requests' total latency, from records.jsonl.",
                                     charts.latency_chart, lat, f"{slug}-latency", colours))
    notes = [(e, n) for e in endpoints for n in by_ep[e].notes]
    counts = [(e, k, v) for e in endpoints for k, v in sorted(by_ep[e].counts.items())]
    dcounts = [DisagreementCount(endpoint=e, total=len(by_ep[e].disagreements),
                                 shown=min(len(by_ep[e].disagreements), MAX_DISAGREEMENTS))
               for e in endpoints if by_ep[e].disagreements]
    return SuiteSection(
        name=manifest.name, kind=manifest.kind, version=manifest.version, content_hash=manifest.content_hash,
        case_count=manifest.case_count, endpoints=endpoints, metric_rows=metric_rows, comparisons=comparisons,
        charts=chart_list, notes=notes, counts=counts, disagreement_total=sum(c.total for c in dcounts),
        disagreements_shown=sum(c.shown for c in dcounts), collapsed=collapsed, sentences=sentences,
        disagreement_counts=dcounts,
    )


def _family(metric: str) -> str:
    """Metrics that share a first word form a family (forced_kl_*, expected_*, trigger_*, ...)."""
    return metric.split("_", 1)[0] if "_" in metric else metric


def _collapse_families(rows: list[MetricRow], values: dict[str, list[Interval | None]]) -> tuple[list[MetricRow],
                                                                                                 list[Collapsed]]:
    """Keep rows that say something; a family whose every figure is zero or not measured becomes one line.

    A single all-zero metric stays (an error rate of 0 with its interval is a finding); a single metric that no
    endpoint measured collapses too, so the table holds figures only.
    """
    fams: dict[str, list[MetricRow]] = defaultdict(list)
    for r in rows:
        fams[_family(r.metric)].append(r)
    out_rows: list[MetricRow] = []
    collapsed: list[Collapsed] = []
    for fam, members in fams.items():
        nothing = all(iv is None or iv.value is None for r in members for iv in values[r.metric])
        zero = all(iv is None or iv.value is None or abs(iv.value - _identity(r.metric)) < 1e-12
                   for r in members for iv in values[r.metric])
        if nothing or (zero and len(members) >= 2):
            names = [r.metric for r in members]
            what = "not measured for any endpoint" if nothing else (
                "zero (same top token 100%) or not measured for every endpoint" if any(
                    r.metric.endswith("same_top") for r in members) else "zero or not measured for every endpoint")
            collapsed.append(Collapsed(family=fam, metrics=names,
                                       text=f"{len(names)} {fam}_* metric{'s' if len(names) > 1 else ''}: {what}"))
        else:
            out_rows.extend(members)
    order = {r.metric: i for i, r in enumerate(rows)}
    out_rows.sort(key=lambda r: order[r.metric])
    return out_rows, collapsed


def _identity(metric: str) -> float:
    """The value that shows no difference from the reference: 0, except top-token agreement (1)."""
    return 1.0 if metric.endswith("same_top") else 0.0


def _informative(per: dict[str, Series]) -> bool:
    """A line chart shows something only with several x values and some spread in y (or between endpoints)."""
    ys = [y for s in per.values() for y in s.y if y is not None]
    several = any(len(set(s.x)) >= 3 for s in per.values())
    return several and bool(ys) and max(ys) - min(ys) > 1e-9


def _series_sentence(name: str, per: dict[str, Series]) -> str:
    """What a chart of one point or a flat line would show, as words; endpoints that read the same share a clause."""
    by_text: dict[str, list[str]] = defaultdict(list)
    for e, s in per.items():
        label = s.x_label or "x"
        ys = [y for y in s.y if y is not None]
        if len(set(s.x)) == 1:
            text = (f"{s.y[0]:.3g} at {label} {s.x[0]:g}" if len(s.y) == 1
                    else f"all {len(s.x)} points at {label} {s.x[0]:g}")
        elif ys and max(ys) - min(ys) <= 1e-9:
            text = f"{ys[0]:.3g} throughout {label} {min(s.x):g} to {max(s.x):g} ({len(s.x)} points)"
        else:
            text = ", ".join(f"{y:.3g} at {x:g}" for x, y in zip(s.x, s.y)) + f" ({label})"
        by_text[text].append(e)
    parts = [f"{', '.join(eps)}: {text}" for text, eps in by_text.items()]
    return f"{charts.series_title(name)}: " + "; ".join(parts) + " (a single point or a flat line: no chart)."


def disagreements(summary: RunSummary) -> list[DisagreementView]:
    out = []
    for r in summary.results:
        for d in r.disagreements[:MAX_DISAGREEMENTS]:
            out.append(DisagreementView(endpoint=r.endpoint, suite=r.suite, case_id=d.case_id, kind=d.kind,
                                        reference=d.reference, candidate=d.candidate, request=d.request_excerpt,
                                        detail=d.detail))
    return out


class HistoryView(BaseModel):
    charts: list[Chart] = Field(default_factory=list)
    drift: DriftReport | None = None
    db: str = ""


def history_view(summary: RunSummary, db_path: DbArg, drift: DriftReport | None, jobs: ChartJobs) -> HistoryView:
    """History charts for the verdict metrics of this run's endpoints (last 30 runs, same suite)."""
    df = history_store.load_frame(db_path)
    view = HistoryView(drift=drift, db=history_store.describe_db(db_path))  # a server URL without its credentials
    if df.empty:
        return view
    names = {e.name for e in summary.endpoints}
    df = df[df["endpoint"].isin(names)]
    wanted = [m for m, _ in VERDICT_COLUMNS if m != "pass^k"]
    for i, metric in enumerate(wanted):
        sub = df[df["metric"] == metric]
        for j, suite in enumerate(sorted(sub["suite"].unique())):
            s2 = sub[sub["suite"] == suite]
            runs = sorted(s2["started_at"].unique())[-30:]
            s2 = s2[s2["started_at"].isin(runs)]
            if len(runs) < 2:
                continue
            pts = {
                e: [(str(r.started_at), float(r.value), _nan(r.ci_low), _nan(r.ci_high))
                    for r in g.itertuples() if r.value == r.value]
                for e, g in s2.groupby("endpoint", sort=False)
            }
            cid = f"hist{i}-{j}"
            view.charts.append(jobs.chart(cid, f"{metric_info(metric).label} over time · {suite}",
                                          f"{len(runs)} runs from the history database; bars = 95% CI.",
                                          charts.history_chart, pts, metric, cid, _colours(summary)))
    return view


def _nan(v: Any) -> float | None:
    return None if v is None or v != v else float(v)


def _glossary_key(metric: str) -> str:
    return "pass^k" if metric.startswith("pass^") else metric


def glossary_id(metric: str) -> str:
    """The in-page anchor of a metric's glossary entry (ids stay plain ASCII)."""
    return "g-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in _glossary_key(metric))


def _template_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,  # every {{ }} is escaped; model text is untrusted
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def _script() -> tuple[str, str]:
    """Our inline script and its CSP hash: only this exact script may run in the report."""
    text = resources.files("reports").joinpath("templates/report.js.j2").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return text, f"'sha256-{digest}'"


def render_html(
    summary: RunSummary,
    *,
    records: list[ExchangeRecord] | None = None,
    manifest: Any = None,
    policy: Policy | None = None,
    db_path: DbArg = None,
    drawer: ChartDrawer | None = None,
) -> tuple[str, list[DisclosureCard]]:
    """The report's HTML and the disclosure cards, from typed inputs (no file IO beyond the history db).

    ``drawer``: where the charts are drawn (a running chart worker); in-process when None.
    """
    policy = policy or DEFAULT_POLICY
    has_history = db_path is not None and history_store.history_exists(db_path)  # a SQLite file or a PostgreSQL URL
    drift = detect_drift(summary, db_path, policy.drift) if has_history else None
    if drift is None and not policy.allow_drift:
        # Without a history database the report cannot test drift; say so once instead of a warn mark per row.
        policy = policy.model_copy(update={"allow_drift": True})
    gate = evaluate(summary, policy, drift)
    # the summary's verdicts use the default policy; a policy with its own [verdict] table is applied afresh
    verdicts = compute_verdicts(summary, policy.verdict) if policy.verdict is not None else (
        summary.verdicts or compute_verdicts(summary, VerdictPolicy()))
    rows = verdict_rows(summary, gate, verdicts)
    column_index = {key: i for i, (key, _) in enumerate(VERDICT_COLUMNS)}
    shown = [(k, h) for k, h in VERDICT_COLUMNS if any(c.measured for r in rows for c in r.cells[column_index[k]])]
    hidden = [h for k, h in VERDICT_COLUMNS if (k, h) not in shown]
    headline = [m for m, _ in VERDICT_COLUMNS]
    cards = build_cards(summary, gate, headline, verdicts)
    jobs = ChartJobs(drawer or ChartDrawer())
    sections = [suite_section(summary, i, records or [], gate, jobs) for i in range(len(summary.suites))]
    hist = history_view(summary, db_path, drift, jobs) if has_history else None
    script, script_hash = _script()
    endpoints = [{"name": e.name, "url": public_url(e.base_url), "model": e.model, "key_env": e.api_key_env,
                  "builtin": e.builtin, "is_reference": e.name == summary.reference} for e in summary.endpoints]
    env = _template_env()
    env.filters["fingerprint"] = fingerprint_text
    env.filters["gid"] = glossary_id
    env.filters["in_glossary"] = lambda m: _glossary_key(m) in GLOSSARY
    template = env.get_template("report.html.j2")  # compiled while the worker (if any) draws
    jobs.collect()
    html = template.render(
        s=summary,
        endpoints=endpoints,
        columns=VERDICT_COLUMNS, shown_columns=shown, hidden_columns=hidden, column_index=column_index,
        rows=rows,
        headlines=headlines(summary, verdicts),
        marks=VERDICT_MARKS,
        alpha=(policy.verdict or VerdictPolicy()).alpha,
        glossary=GLOSSARY,
        gate=gate,
        policy=policy,
        sections=sections,
        disagreements=disagreements(summary),
        cards=cards, history=hist, versions=getattr(manifest, "versions", {}) or {}, cost=cost_view(summary),
        script=script,
        csp=f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {script_hash}; "
        "base-uri 'none'; form-action 'none'",
    )
    return html, cards


def render_report(run_dir: Path, *, db_path: DbArg = None, policy: Policy | None = None,
                  drawer: ChartDrawer | None = None) -> Path:
    """Write ``run_dir/report.html`` (and disclosure JSONs) from the run folder; returns the report path.

    ``drawer``: a :class:`ChartDrawer` whose worker process draws the charts (``verifier run`` starts one
    before it measures); None draws them in-process.
    """
    run_dir = Path(run_dir)
    summary = RunSummary.read(run_dir)
    records: list[ExchangeRecord] = []
    manifest = None
    if (run_dir / "records.jsonl").exists():
        records = RecordStore(run_dir / "records.jsonl", read_only=True).read()
    if (run_dir / "manifest.json").exists():
        manifest = RunManifest.load(run_dir)
    html, cards = render_html(summary, records=records, manifest=manifest, policy=policy, db_path=db_path,
                              drawer=drawer)
    write_cards(run_dir, cards)
    out = run_dir / "report.html"
    tmp = run_dir / "report.html.tmp"
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out
