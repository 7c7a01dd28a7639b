"""Compose the report's view-model from a run: drift, gate, verdicts, suites, real disagreements, history charts.

Why a step of its own: ``verifier run`` and ``verifier report`` (``verifier/cli/compose.py``) compose the view once,
after measuring and before drawing; :mod:`reports.render` turns the :class:`~reports.view.ReportView` into HTML and
decides nothing. A section added later (cost, claims) adds a field here and a partial there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reports import charts
from reports.chart_worker import ChartDrawer
from reports.cost_view import cost_view
from reports.disagreements import real_disagreements
from reports.disclosure import build_cards
from reports.glossary import GLOSSARY, entry, glossary_key
from reports.numbers import fmt_diff, fmt_mapping, fmt_plain
from reports.suite_view import MAX_DISAGREEMENTS, ChartJobs, make_cell, ordered, suite_section
from reports.view import (
    Cell,
    DisagreementView,
    GateView,
    Headline,
    HistoryView,
    ReportView,
    VerdictRow,
)
from verifier import history as history_store
from verifier.history.drift import DriftReport, detect_drift
from verifier.history.gate import DEFAULT_POLICY, GateResult, Policy, evaluate, metric_info
from verifier.http.redaction import public_url
from verifier.records import ExchangeRecord, Interval
from verifier.run.summary import EndpointSuiteResult, MetricEvidence, RunSummary, Verdict
from verifier.run.usage_line import verdict_usage
from verifier.run.verdict import VerdictPolicy, compute_verdicts

if TYPE_CHECKING:
    from verifier.history import DbArg

__all__ = ["VERDICT_COLUMNS", "VERDICT_MARKS", "build_report_view"]

#: The verdict table's columns: (metric or "pass^k", heading). pass^k = the largest k (> 1) the agent suite reported.
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
#: Status marks of the headlines: a symbol and a word, so colour is never the only cue.
VERDICT_MARKS = {"consistent": "✓ consistent", "differs": "✗ differs", "inconclusive": "? inconclusive"}
DECISION_WORDS = {
    "point": "Rule point: an absolute threshold is judged by the figure's point estimate, and a pass whose 95% CI "
             "still reaches across the line is marked warn",
    "ci_strict": "Rule ci_strict: an absolute threshold passes only when the whole 95% CI clears it",
    "ci_lenient": "Rule ci_lenient: an absolute threshold fails only when the whole 95% CI misses it",
}


#: Said with the rule when the run was ``--sequential`` (docs/verdict.md, "Sequential mode").
SEQUENTIAL_WORDS = [
    "This run was sequential: schema accuracy, forced-call success, trigger F1 and argument agreement are judged by "
    "anytime-valid tests at every look (trigger F1 and argument agreement against confidence sequences for both the "
    "candidate's figure and the reference's own floor), and their status is the sequential decision (settled after "
    "N of M cases, or open), never a fixed-n test on the cases sent. No 'more cases' advice is given for an adaptive "
    "stop.",
]


def _rule_words(alpha: float, vp: VerdictPolicy) -> list[str]:
    """The verdict rule, inline: a reader of this one HTML file has no docs folder beside it."""
    margins = ", ".join(f"{metric_info(m).label} ±{100 * v:g} pts" if metric_info(m).unit == "%" else
                        f"{metric_info(m).label} {v:g}" for m, v in vp.margins.items())
    return [
        "Each candidate is compared with the reference on the same cases, metric by metric (trigger F1, schema "
        "accuracy, forced-call success, agent task success, mean KL), with a 95% confidence interval per difference.",
        f"differs: a difference is significant after Holm's correction across that candidate's metrics (α = {alpha:g}),"
        f" or the KL fingerprint names another precision variant with margin.",
        f"consistent: every difference is shown inside its equivalence margin by two one-sided tests at α = "
        f"{alpha:g} (margins: {margins}).",
        "inconclusive: neither is shown; the headline says about how many more cases would settle it.",
    ]


def _pass_k(results: list[EndpointSuiteResult]) -> list[tuple[str, str, Interval]]:
    out = []
    for r in results:
        ks = [int(m.split("^", 1)[1]) for m in r.metrics if m.startswith("pass^") and m.split("^", 1)[1].isdigit()]
        if ks and max(ks) > 1:  # pass^1 is task success, shown in its own column
            name = f"pass^{max(ks)}"
            out.append((name, r.suite, r.metrics[name]))
    return out


def headlines(summary: RunSummary, verdicts: dict[str, Verdict]) -> list[Headline]:
    """One line per endpoint, reference first: the verdict's own headline and evidence, as it wrote them."""
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
            usage = verdict_usage(summary, ep.name, v)
            out.append(Headline(endpoint=ep.name, status=v.status, mark=VERDICT_MARKS[v.status], text=v.headline,
                                evidence=[evidence_line(e) for e in v.evidence], usage=usage.text,
                                limit=usage.limit or "", warnings=[w for w in v.warnings if w not in v.headline]))
    return out


def evidence_line(e: MetricEvidence) -> str:
    """One headline metric's evidence in words and units: the difference, its CI and n, and what the tests said."""
    d = e.difference
    ci = f" [{fmt_diff(e.metric, d.low)}, {fmt_diff(e.metric, d.high)}]" if d.low is not None and d.high is not None \
        else ""
    said = "significant after Holm" if e.significant else "shown inside the margin" if e.equivalent else "not settled"
    if e.test == "sequential (anytime-valid)":
        # the sequential decision ("settled by the sequential test after N of M cases"), not a fixed-n test; the
        # reason's later clauses (the unused fixed-n figure) stay in summary.json
        said = (e.reason or e.status or said).split("; ", 1)[0]
    margin = f", margin ±{fmt_diff(e.metric, e.margin).lstrip('+')}" if e.margin is not None else ""
    return (f"{metric_info(e.metric).label} ({e.suite}): {fmt_diff(e.metric, d.value)}{ci}, n={d.n}; "
            f"{said}{margin}")


def _fingerprint_words(v: Verdict | None) -> str:
    fp = v.fingerprint if v else None
    if fp is None:
        return ""
    if fp.distance is None:
        return fp.profile
    ref = (f"; the reference's profile {fp.reference_profile} is at {fmt_plain(fp.reference_distance)}"
           if fp.reference_distance is not None else "")
    return f"{fp.profile} (distance {fmt_plain(fp.distance)}, 0 = same KL shape{ref})"


def verdict_rows(summary: RunSummary, gate: GateResult, verdicts: dict[str, Verdict]) -> list[VerdictRow]:
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
        v = verdicts.get(ep.name)
        rows.append(VerdictRow(endpoint=ep.name, model=ep.model,
                               is_reference=ep.is_reference or ep.name == summary.reference,
                               status=gate.endpoint_status(ep.name), cells=cols, verdict=v,
                               fingerprint_text=_fingerprint_words(v)))
    rows.sort(key=lambda r: not r.is_reference)
    return rows


def gate_view(gate: GateResult, policy: Policy) -> GateView:
    absolute = bool(policy.thresholds)
    if policy.source == DEFAULT_POLICY.source:
        words = ("the built-in default policy: each candidate is judged by its verdict against the reference "
                 "(fail on differs, warn on inconclusive), with the verdict's margins; no absolute thresholds")
    else:
        parts = []
        if policy.verdict is not None:
            parts.append(f"the verdict against the reference (fail on {', '.join(policy.verdict.fail_on) or 'none'}, "
                         f"warn on {', '.join(policy.verdict.warn_on) or 'none'})")
        if absolute:
            parts.append("absolute thresholds " + ", ".join(t.text for t in policy.thresholds) +
                         " (marked 'abs.' beside the figures they judge)")
        if not policy.allow_drift:
            parts.append("no drift against the endpoint's history")
        words = f"policy file {policy.source}: " + ("; ".join(parts) or "no checks")
    return GateView(status=gate.status, policy=gate.policy, policy_words=words, decision=gate.decision,
                    decision_words=DECISION_WORDS.get(gate.decision, gate.decision), absolute=absolute,
                    checks=list(gate.checks))


def disagreements(summary: RunSummary) -> tuple[list[DisagreementView], int]:
    """Real disagreements (different outcomes) per endpoint x suite, the first MAX_DISAGREEMENTS each, and the
    number of identical pairs left out."""
    out, dropped = [], 0
    for r in summary.results:
        real = real_disagreements(r.disagreements)
        dropped += len(r.disagreements) - len(real)
        for d in real[:MAX_DISAGREEMENTS]:
            out.append(DisagreementView(endpoint=r.endpoint, suite=r.suite, case_id=d.case_id, kind=d.kind,
                                        reference=d.reference, candidate=d.candidate, request=d.request_excerpt,
                                        detail=d.detail))
    return out, dropped


def history_view(summary: RunSummary, db_path: DbArg, drift: DriftReport | None, jobs: ChartJobs,
                 colours: dict[str, str]) -> HistoryView:
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
            values = [float(v) for v in s2["value"] if v == v]
            if len(runs) < 3 or not values or max(values) - min(values) <= 1e-12:
                continue  # two runs or a flat line: nothing a chart shows better than the table
            pts = {
                e: [(str(r.started_at), float(r.value), _nan(r.ci_low), _nan(r.ci_high))
                    for r in g.itertuples() if r.value == r.value]
                for e, g in s2.groupby("endpoint", sort=False)
            }
            cid = f"hist{i}-{j}"
            view.charts.append(jobs.chart(cid, f"{metric_info(metric).label} over time · {suite}",
                                          f"{len(runs)} runs from the history database; bars = 95% CI.",
                                          charts.history_chart, pts, metric, cid, colours))
    return view


def _nan(v: Any) -> float | None:
    return None if v is None or v != v else float(v)


def _latency_suite(records: list[ExchangeRecord]) -> str | None:
    """The suite whose latency distribution is drawn (the one with the most successful timed requests)."""
    counts: dict[str, int] = {}
    for r in records:
        if r.latency_s is not None and r.ok:
            counts[r.suite] = counts.get(r.suite, 0) + 1
    return max(counts, key=lambda s: counts[s]) if counts else None


def build_report_view(
    summary: RunSummary,
    *,
    records: list[ExchangeRecord] | None = None,
    manifest: Any = None,
    policy: Policy | None = None,
    db_path: DbArg = None,
    drawer: ChartDrawer | None = None,
) -> ReportView:
    """Everything the page shows. Charts are submitted to ``drawer`` (in-process when None) and collected here."""
    policy = policy or DEFAULT_POLICY
    has_history = db_path is not None and history_store.history_exists(db_path)  # a SQLite file or a PostgreSQL URL
    drift = detect_drift(summary, db_path, policy.drift) if has_history else None
    if drift is None and not policy.allow_drift:
        # Without a history database the report cannot test drift; say so once instead of a warn mark per row.
        policy = policy.model_copy(update={"allow_drift": True})
    gate = evaluate(summary, policy, drift)
    vp = policy.verdict or VerdictPolicy()
    # the summary's verdicts use the default policy; a policy with its own [verdict] table is applied afresh
    verdicts = compute_verdicts(summary, policy.verdict) if policy.verdict is not None else (
        summary.verdicts or compute_verdicts(summary, VerdictPolicy()))
    rows = verdict_rows(summary, gate, verdicts)
    column_index = {key: i for i, (key, _) in enumerate(VERDICT_COLUMNS)}
    shown = [(k, h) for k, h in VERDICT_COLUMNS if any(c.measured for r in rows for c in r.cells[column_index[k]])]
    hidden = [h for k, h in VERDICT_COLUMNS if (k, h) not in shown]
    cards = build_cards(summary, gate, [m for m, _ in VERDICT_COLUMNS], verdicts)
    jobs = ChartJobs(drawer or ChartDrawer())
    colours = charts.colour_map(ordered([e.name for e in summary.endpoints], summary.reference))
    recs = records or []
    lat_suite = _latency_suite(recs)
    sections = [suite_section(summary, i, recs, gate, jobs, colours, lat_suite) for i in range(len(summary.suites))]
    hist = history_view(summary, db_path, drift, jobs, colours) if has_history else None
    shown_metrics = {r.metric for s in sections for r in s.headline_rows + s.other_rows}
    glossary = dict(GLOSSARY)
    for m in sorted(shown_metrics):
        text = entry(m)
        if text is not None and glossary_key(m) not in glossary:
            glossary[m] = text
    dis, dropped = disagreements(summary)
    endpoints = [
        {"name": e.name, "url": public_url(e.base_url), "model": e.model, "key_env": e.api_key_env,
         "builtin": fmt_mapping(e.builtin), "is_reference": e.name == summary.reference}
        for e in summary.endpoints
    ]
    jobs.collect()
    return ReportView(
        summary=summary, endpoints=endpoints, columns=VERDICT_COLUMNS, shown_columns=shown, hidden_columns=hidden,
        column_index=column_index, rows=rows, headlines=headlines(summary, verdicts), marks=VERDICT_MARKS,
        alpha=vp.alpha, rule_words=_rule_words(vp.alpha, vp) + (SEQUENTIAL_WORDS if summary.sequential else []),
        glossary=glossary, gate=gate_view(gate, policy),
        sections=sections, disagreements=dis, identical_dropped=dropped, cards=cards, history=hist,
        drift_tested=drift is not None,
        settings_text=[(k, fmt_mapping({k: v}).split(" = ", 1)[1]) for k, v in summary.settings.items()],
        versions=getattr(manifest, "versions", {}) or {},
        extra={"cost": cost_view(summary)},
    )

