"""One suite's part of the report view: headline rows first, every other figure in "all figures", the comparisons
in words and units, real disagreements only, and a chart only where it shows a spread worth seeing.

Why charts are decided here (before rendering): whether a chart says anything is a question about the data
(is there a difference whose interval excludes 0? do the lines differ?), so it is answered with the figures,
and the renderer draws what it is handed.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from reports import charts
from reports.chart_worker import ChartDrawer, ChartJob
from reports.disagreements import real_disagreements
from reports.glossary import describe_test, entry
from reports.numbers import fmt_diff, fmt_value
from reports.view import Cell, Chart, Collapsed, ComparisonRow, DisagreementCount, MetricRow, SuiteSection
from verifier.history.gate import Check, GateResult, metric_info
from verifier.records import ExchangeRecord, Interval
from verifier.run.summary import EndpointSuiteResult, RunSummary, Series

__all__ = ["HEADLINE_BY_KIND", "MAX_DISAGREEMENTS", "ChartJobs", "make_cell", "ordered", "suite_section"]

#: Disagreements shown in the page per endpoint x suite; the rest stay in summary.json and records.jsonl (the count
#: and a filter to find them are stated). Why so few: a 2,000-case run must stay a page that opens in two seconds.
MAX_DISAGREEMENTS = 40
#: The figures a reader of each kind of suite looks at first; everything else goes to "all figures".
HEADLINE_BY_KIND: dict[str, tuple[str, ...]] = {
    "toolcall": ("trigger_f1", "schema_accuracy", "forced_call_success", "args_exact_agreement", "error_rate",
                 "latency_p50_s"),
    "agent": ("task_success", "pass^k", "step_validity"),
    "logprob": ("kl_mean", "same_top"),
    "cache": ("cache_hit_rate", "cache_bound"),
}
#: Latency medians closer than this (relative) draw no distribution chart: the sentence says it.
LATENCY_SPREAD = 0.10


class ChartJobs:
    """The charts of one report: drawn by a :class:`ChartDrawer` (perhaps in its worker process while the rest
    of the view is composed), their SVG filled in by :meth:`collect` before the template renders."""

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


def ordered(endpoints: list[str], reference: str) -> list[str]:
    return sorted(endpoints, key=lambda e: (e != reference, endpoints.index(e)))


def make_cell(metric: str, suite: str | None, iv: Interval | None, check: Check | None = None) -> Cell:
    if iv is None or iv.value is None:
        return Cell(metric=metric, suite=suite)
    has_ci = iv.low is not None and iv.high is not None
    ci = f"[{fmt_value(metric, iv.low)}, {fmt_value(metric, iv.high)}]" if has_ci else "CI not computed"
    return Cell(metric=metric, suite=suite, value=fmt_value(metric, iv.value), ci=ci, n=iv.n, measured=True,
                status=check.status if check else None,
                message=f"absolute threshold {check.name}: {check.message}" if check else "")


def _max_pass_k(metrics: list[str]) -> str | None:
    ks = [int(m.split("^", 1)[1]) for m in metrics if m.startswith("pass^") and m.split("^", 1)[1].isdigit()]
    return f"pass^{max(ks)}" if ks and max(ks) > 1 else None


def suite_section(summary: RunSummary, suite_idx: int, records: list[ExchangeRecord], gate: GateResult,
                  jobs: ChartJobs, colours: dict[str, str], latency_suite: str | None) -> SuiteSection:
    manifest = summary.suites[suite_idx]
    results = [r for r in summary.results if r.suite == manifest.name]
    endpoints = ordered([r.endpoint for r in results], summary.reference)
    by_ep = {r.endpoint: r for r in results}
    metrics = list(dict.fromkeys(m for e in endpoints for m in by_ep[e].metrics))
    if "task_success" in metrics:  # pass^1 is task success by another estimator: one quantity, one figure
        metrics = [m for m in metrics if m != "pass^1"]
    rows = [
        MetricRow(metric=m, label=metric_info(m).label, glossary=entry(m) is not None,
                  cells=[make_cell(m, manifest.name, by_ep[e].metrics.get(m), gate.for_cell(e, m, manifest.name))
                         for e in endpoints])
        for m in metrics
    ]
    kept, collapsed = _collapse_families(rows, {m: [by_ep[e].metrics.get(m) for e in endpoints] for m in metrics})
    heads = [m if m != "pass^k" else _max_pass_k(metrics) for m in HEADLINE_BY_KIND.get(manifest.kind, ())]
    head_rows = [r for h in heads for r in kept if r.metric == h]
    other_rows = [r for r in kept if r not in head_rows]
    comparisons = _comparisons(endpoints, by_ep)
    slug = f"s{suite_idx}"
    chart_list: list[Chart] = []
    sentences: list[str] = []
    _difference_chart(comparisons, by_ep, endpoints, slug, jobs, colours, chart_list, sentences)
    _series_charts(endpoints, by_ep, slug, jobs, colours, chart_list, sentences)
    _latency(records, manifest.name, summary.reference, latency_suite, slug, jobs, colours, chart_list, sentences)
    notes = _shared_notes(endpoints, by_ep)
    counts = [(e, k, v) for e in endpoints for k, v in sorted(by_ep[e].counts.items())]
    dcounts = []
    for e in endpoints:
        flagged = by_ep[e].disagreements
        real = real_disagreements(flagged)
        if flagged:
            dcounts.append(DisagreementCount(endpoint=e, total=len(real), shown=min(len(real), MAX_DISAGREEMENTS),
                                             identical=len(flagged) - len(real)))
    return SuiteSection(
        name=manifest.name, kind=manifest.kind, version=manifest.version, content_hash=manifest.content_hash,
        case_count=manifest.case_count, endpoints=endpoints, headline_rows=head_rows, other_rows=other_rows,
        comparisons=comparisons, charts=chart_list, notes=notes, counts=counts,
        disagreement_total=sum(c.total for c in dcounts), disagreements_shown=sum(c.shown for c in dcounts),
        collapsed=collapsed, sentences=sentences, disagreement_counts=dcounts,
    )


def _comparisons(endpoints: list[str], by_ep: dict[str, EndpointSuiteResult]) -> list[ComparisonRow]:
    out = []
    for e in endpoints:
        for key, c in by_ep[e].comparisons.items():
            d = c.difference
            name = c.metric or key
            out.append(ComparisonRow(
                endpoint=e, metric=name, label=metric_info(name).label, diff=fmt_diff(name, d.value),
                ci=(f"[{fmt_diff(name, d.low)}, {fmt_diff(name, d.high)}]" if d.low is not None and d.high is not None
                    else "CI not computed"),
                n=d.n, p_value="n/a" if c.p_value is None else ("< 0.0001" if c.p_value < 1e-4 else f"{c.p_value:.2g}"),
                test=describe_test(c.test),
            ))
    return out


def _difference_chart(comparisons: list[ComparisonRow], by_ep: dict[str, EndpointSuiteResult], endpoints: list[str],
                      slug: str, jobs: ChartJobs, colours: dict[str, str], chart_list: list[Chart],
                      sentences: list[str]) -> None:
    """Differences of proportions from the reference, drawn only when one of them is shown not to be 0."""
    rows = [(metric_info(c.metric or k).label, e, c.difference, "%")
            for e in endpoints for k, c in by_ep[e].comparisons.items()
            if metric_info(c.metric or k).unit == "%" and c.difference.value is not None]
    if not rows:
        return
    shown = [r for r in rows if r[2].low is not None and r[2].high is not None and (r[2].low > 0 or r[2].high < 0)]
    if not shown:
        widest = max(abs(x) for r in rows for x in (r[2].low or 0.0, r[2].high or 0.0))
        sentences.append(f"Every difference from the reference ({len(rows)}) has 0 inside its 95% CI "
                         f"(all within ±{100 * widest:.1f} pts): no difference chart.")
        return
    chart_list.append(jobs.chart(f"{slug}-diff", "Difference from the reference, 95% CIs",
                                 "Dot = candidate − reference in points, bar = 95% CI, line = no difference; "
                                 "the axis is zoomed to the differences.",
                                 charts.difference_chart, rows, f"{slug}-diff", colours))


def _series_charts(endpoints: list[str], by_ep: dict[str, EndpointSuiteResult], slug: str, jobs: ChartJobs,
                   colours: dict[str, str], chart_list: list[Chart], sentences: list[str]) -> None:
    names = list(dict.fromkeys(s.name for e in endpoints for s in by_ep[e].series if s.x))
    for j, name in enumerate(names):
        per: dict[str, Series] = {}
        for e in endpoints:
            for s in by_ep[e].series:
                if s.name == name and s.x:
                    per[e] = s
        cid = f"{slug}-series{j}"
        if not informative(per):
            sentences.append(series_sentence(name, per))
            continue
        chart_list.append(jobs.chart(cid, charts.series_title(name),
                                     "Shaded band = 95% CI where the scoring code provided one; dashed = an "
                                     "upper line named on the y axis (e.g. the cache bound).",
                                     charts.series_chart, name, per, cid, colours))


def informative(per: dict[str, Series]) -> bool:
    """A line chart shows something only with at least five x values, some spread in y, and lines that differ
    between endpoints (identical lines overlap into one)."""
    ys = [y for s in per.values() for y in s.y if y is not None]
    several = any(len(set(s.x)) >= 5 for s in per.values())
    if not (several and ys and max(ys) - min(ys) > 1e-9):
        return False
    shapes = {(tuple(round(x, 9) for x in s.x), tuple(round(y, 9) for y in s.y)) for s in per.values()}
    return len(shapes) > 1 or len(per) == 1


def series_sentence(name: str, per: dict[str, Series]) -> str:
    """What a chart of few points, a flat line or identical lines would show, as words; endpoints that read the
    same share a clause."""
    by_text: dict[str, list[str]] = defaultdict(list)
    for e, s in per.items():
        label = s.x_label or "x"
        ys = [y for y in s.y if y is not None]
        if len(set(s.x)) == 1:
            text = (f"{s.y[0]:.3g} at {label} {s.x[0]:g}" if len(s.y) == 1
                    else f"all {len(s.x)} points at {label} {s.x[0]:g}")
        elif ys and max(ys) - min(ys) <= 1e-9:
            text = f"{ys[0]:.3g} throughout {label} {min(s.x):g} to {max(s.x):g} ({len(s.x)} points)"
        elif len(s.x) <= 6:
            text = ", ".join(f"{y:.3g} at {x:g}" for x, y in zip(s.x, s.y)) + f" ({label})"
        else:
            text = f"from {s.y[0]:.3g} at {label} {s.x[0]:g} to {s.y[-1]:.3g} at {s.x[-1]:g} ({len(s.x)} points)"
        by_text[text].append(e)
    parts = [f"{', '.join(eps)}: {text}" for text, eps in by_text.items()]
    why = "the same for every endpoint" if len(by_text) == 1 and len(per) > 1 else "too few points or a flat line"
    return f"{charts.series_title(name)}: " + "; ".join(parts) + f" ({why}: no chart)."


def _latency(records: list[ExchangeRecord], suite: str, reference: str, latency_suite: str | None, slug: str,
             jobs: ChartJobs, colours: dict[str, str], chart_list: list[Chart], sentences: list[str]) -> None:
    """One latency chart per report (the suite with the most requests), and only when the medians differ."""
    lat: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.suite == suite and r.latency_s is not None and r.ok:
            lat[r.endpoint].append(r.latency_s)
    if not any(lat.values()):
        return
    lat = {e: lat[e] for e in ordered(list(lat), reference)}
    med = {e: sorted(v)[len(v) // 2] for e, v in lat.items() if v}
    ref_med = med.get(reference)
    spread = ref_med is not None and ref_med > 0 and any(abs(m - ref_med) / ref_med >= LATENCY_SPREAD
                                                         for m in med.values())
    enough = all(len(set(v)) >= 20 for v in lat.values())
    if suite == latency_suite and spread and enough:
        chart_list.append(jobs.chart(f"{slug}-latency", "Latency distribution",
                                     "Empirical CDF of successful requests' total latency, from records.jsonl; "
                                     "latency depends on the machine's load as well as the endpoint.",
                                     charts.latency_chart, lat, f"{slug}-latency", colours))
        return
    sentences.append("Latency (median, successful requests): " + "; ".join(
        f"{e} {fmt_value('latency_p50_s', m)} (n={len(lat[e])})" for e, m in med.items()) + ".")


def _shared_notes(endpoints: list[str], by_ep: dict[str, EndpointSuiteResult]) -> list[tuple[str, str]]:
    """Each note once, with every endpoint it was written for."""
    who: dict[str, list[str]] = {}
    for e in endpoints:
        for n in by_ep[e].notes:
            who.setdefault(n, [])
            if e not in who[n]:
                who[n].append(e)
    return [(", ".join(eps), n) for n, eps in who.items()]


def _family(metric: str) -> str:
    """Metrics that share a first word form a family (forced_kl_*, expected_*, trigger_*, ...)."""
    return metric.split("_", 1)[0] if "_" in metric else metric


def _collapse_families(rows: list[MetricRow], values: dict[str, list[Interval | None]]) -> tuple[list[MetricRow],
                                                                                                 list[Collapsed]]:
    """Keep rows that say something; a family whose every figure is zero or not measured becomes one line."""
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
