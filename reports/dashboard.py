"""``verifier history dashboard``: one self-contained page over the whole history database.

Per endpoint: the headline metrics over time with their 95% intervals, drift marks from the same test the gate
uses (``verifier.history.drift.detect_drift_points``, each run tested against the runs before it), the verdict and KL
fingerprint of every run whose folder is known, and a link to that run's report.

Why a page of its own: the run report answers "is tonight's endpoint the reference's model?"; a team watching a
provider for months asks "when did it change?", which needs every run on one axis. History is read through
``verifier.history``'s public functions (``load_points``, ``load_runs``, ``load_summary``), so a SQLite file and a
PostgreSQL server draw the same page.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from pydantic import BaseModel, Field

from reports.dashboard_trends import TrendChart, cost_chart, run_costs, trend_charts
from verifier.history import (
    CostPoint,
    DbArg,
    HistoryError,
    MetricPoint,
    describe_db,
    load_costs,
    load_points,
    load_runs,
    load_summary,
)
from verifier.history.drift import DriftSettings, detect_drift_points
from verifier.history.gate import metric_info
from verifier.run.verdict import HEADLINE_METRICS, compute_verdicts

__all__ = ["DASHBOARD_METRICS", "DashboardRun", "build_dashboard", "render_dashboard"]

#: Headline metrics drawn per endpoint, in order (forced_call_success appears once a suite reports it).
DASHBOARD_METRICS = list(HEADLINE_METRICS)
#: Also drawn over time, never drift-tested: latency follows the machine's load as much as the endpoint.
TREND_ONLY = ["latency_p50_s"]


class DashboardRun(BaseModel):
    """One run of one endpoint as the dashboard lists it."""

    run_id: str
    started_at: str
    report: str | None = None  # link to the run's report.html, when its folder is known and the file exists
    verdict: str | None = None  # consistent / differs / inconclusive / reference
    headline: str | None = None
    fingerprint: str | None = None
    figures: dict[str, str] = Field(default_factory=dict)  # metric -> "98.5% [92.1, 99.7] n=68"
    drift: list[str] = Field(default_factory=list)  # "suite/metric" flagged in this run
    cost: str | None = None  # "$0.0123 (120 requests)" from the history's cost rows; None: none indexed


class EndpointView(BaseModel):
    name: str
    is_reference: bool
    runs: list[DashboardRun]  # newest first
    metrics: list[str] = Field(default_factory=list)  # headline metrics this endpoint has any figure for
    drift_total: int = 0
    drift_words: str = ""  # "drift flagged in 1 of 115 runs tested" or "drift not tested (needs 6 runs, has 3)"


class DashboardView(BaseModel):
    db: str
    run_count: int
    endpoints: list[EndpointView]
    drift_statement: str
    generated_from: str
    trends: list[TrendChart] = Field(default_factory=list)  # every endpoint on one axis per metric and suite
    cost: TrendChart | None = None  # cost per run, when run folders' summary.json hold "cost"


def run_folders(db_path: DbArg) -> dict[str, Path]:
    """run_id -> folder as recorded at indexing time (SQLite or PostgreSQL, through ``history.load_runs``)."""
    return {r.run_id: Path(r.run_dir) for r in load_runs(db_path) if r.run_dir}


def _fmt(metric: str, v: float | None, lo: float | None, hi: float | None, n: int) -> str:
    """A figure with its CI and n, to 4 significant digits as in summary.json (a run's trend is read in detail)."""
    if v is None:
        return "not measured"
    unit = metric_info(metric).unit
    f = (lambda x: f"{100 * x:.4g}") if unit == "%" else (lambda x: f"{x:.4g}")
    suffix = "%" if unit == "%" else " s" if unit == "s" else ""
    ci = f" [{f(lo)}, {f(hi)}]" if lo is not None and hi is not None else ""
    return f"{f(v)}{suffix}{ci} n={n}"


def _points(db_path: DbArg) -> list[MetricPoint]:
    """Every run's headline metrics (and latency), as the typed rows drift also reads."""
    return [p for p in load_points(db_path, basis=None) if p.metric in DASHBOARD_METRICS + TREND_ONLY]


def _drift_flags(points: list[MetricPoint], settings: DriftSettings) -> tuple[dict[tuple[str, str], list[str]],
                                                                              dict[str, set[str]]]:
    """(run_id, endpoint) -> flagged "suite/metric", each run tested against the runs before it; and endpoint ->
    the runs where at least one series was tested at all (fewer runs than ``min_history``: none)."""
    points = [p for p in points if p.metric not in TREND_ONLY]
    by_run: dict[str, list[MetricPoint]] = defaultdict(list)
    for p in points:
        by_run[p.run_id].append(p)
    flags: dict[tuple[str, str], list[str]] = defaultdict(list)
    tested: dict[str, set[str]] = defaultdict(set)
    for run_id, current in by_run.items():
        report = detect_drift_points(run_id, current, points, settings)
        for t in report.tests:
            tested[t.endpoint].add(run_id)
        for t in report.drifted:
            label = f"{t.suite}/{t.metric}" + (" (vs reference)" if t.basis == "vs_reference" else "")
            flags[(run_id, t.endpoint)].append(label)
    return flags, tested


def _cost_text(c: CostPoint | None) -> str | None:
    """What the endpoint cost in the run, with its denominator (requests, those that reported usage)."""
    if c is None:
        return None
    usd = "no price" if c.usd is None else f"${c.usd:.4f}"
    return f"{usd} ({c.requests} requests, {c.with_usage} reported usage)"


def _link(report: Path, out: Path) -> str:
    """A relative, ``./``-prefixed, percent-encoded link from the dashboard to a run's report.

    Why every part is encoded: folder names are data. A run folder named ``javascript:alert(1)`` once became
    ``href="javascript:alert(1)/report.html"``, a script URL (only the page's CSP stopped a click); ``#``, ``?``
    or ``%`` in a name would cut or change the link. Encoded, ``:`` is ``%3A``, and with the ``./`` prefix no
    first segment can read as a scheme. A report on another Windows drive gets a file:// URI built by pathlib.
    """
    try:
        rel = Path(os.path.relpath(report.resolve(), out.resolve().parent)).as_posix()
    except ValueError:  # another drive on Windows
        return report.resolve().as_uri()
    return "./" + "/".join(quote(part, safe="") for part in rel.split("/"))


def build_dashboard(db_path: DbArg, out: Path, settings: DriftSettings | None = None) -> DashboardView:
    """Everything the page shows, from the history database (and run folders where known)."""
    settings = settings or DriftSettings(metrics=DASHBOARD_METRICS)
    points = _points(db_path)
    folders = run_folders(db_path)
    costs = {(c.run_id, c.endpoint): c for c in load_costs(db_path)}
    flags, tested = _drift_flags(points, settings)
    summaries: dict[str, Any] = {}
    for run_id, folder in folders.items():
        try:
            summaries[run_id] = load_summary(folder)
        except HistoryError:
            continue  # folder moved or deleted: the run is still drawn from the database, without a verdict
    verdicts = {run_id: (s.reference, s.verdicts or compute_verdicts(s), s.fingerprints)
                for run_id, s in summaries.items()}

    endpoints: dict[str, list[MetricPoint]] = defaultdict(list)
    for p in points:
        endpoints[p.endpoint].append(p)
    views = []
    for name, pts in sorted(endpoints.items()):
        runs_by_id: dict[str, DashboardRun] = {}
        for p in sorted(pts, key=lambda p: (p.started_at, p.run_id)):
            run = runs_by_id.setdefault(p.run_id, DashboardRun(run_id=p.run_id, started_at=p.started_at,
                                                               drift=flags.get((p.run_id, name), [])))
            if p.basis == "value":
                one_suite = len({q.suite for q in pts if q.metric == p.metric}) == 1
                key = p.metric if one_suite else f"{p.metric} · {p.suite}"
                run.figures[key] = _fmt(p.metric, p.value, p.ci_low, p.ci_high, p.n)
        for run in runs_by_id.values():
            run.cost = _cost_text(costs.get((run.run_id, name)))
            run_folder = folders.get(run.run_id)
            if run_folder is not None and (run_folder / "report.html").is_file():
                run.report = _link(run_folder / "report.html", out)
            if run.run_id in verdicts:
                reference, vs, fps = verdicts[run.run_id]
                if name == reference:
                    run.verdict = "reference"
                elif name in vs:
                    run.verdict, run.headline = vs[name].status, vs[name].headline
                fp = fps.get(name)
                if isinstance(fp, dict) and fp.get("verdict"):
                    run.fingerprint = str(fp["verdict"])
        runs_newest = list(reversed(runs_by_id.values()))
        measured = [m for m in DASHBOARD_METRICS if any(p.metric == m and p.basis == "value" for p in pts)]
        flagged = sum(len(r.drift) > 0 for r in runs_newest)
        n_tested = len(tested.get(name, ()))
        words = (f"drift flagged in {flagged} of the {n_tested} runs tested" if n_tested else
                 f"drift not tested (needs {settings.min_history + 1} runs, has {len(runs_newest)})")
        views.append(EndpointView(name=name, is_reference=any(p.is_reference for p in pts), runs=runs_newest,
                                  metrics=measured, drift_total=flagged, drift_words=words))
    views.sort(key=lambda v: (not v.is_reference, v.name))
    statement = (f"Drift: each run is tested against the {settings.window} runs before it on the same suite content "
                 f"(at least {settings.min_history} needed), "
                 f"{settings.method.upper() if settings.method == 'bh' else 'Holm'}-adjusted across that run's "
                 f"headline series at α = {settings.alpha:g}; a red cross marks a flagged run.")
    order = [v.name for v in views]
    trends = trend_charts(points, flags, order, DASHBOARD_METRICS + TREND_ONLY)
    cost = cost_chart(run_costs(folders), order)
    return DashboardView(db=describe_db(db_path), run_count=len({p.run_id for p in points}), endpoints=views,
                         drift_statement=statement, generated_from=describe_db(db_path), trends=trends, cost=cost)


def label(metric: str) -> str:
    """The gate's label for people, or the verdict's name for a metric the gate does not list yet."""
    known = metric_info(metric).label
    return known if known != metric else HEADLINE_METRICS.get(metric, metric).capitalize()


def _script() -> tuple[str, str]:
    text = resources.files("reports").joinpath("templates/dashboard.js.j2").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return text, f"'sha256-{digest}'"


def render_dashboard(db_path: DbArg, out: Path, settings: DriftSettings | None = None) -> Path:
    """Write the dashboard page to ``out`` (atomically) and return its path."""
    view = build_dashboard(db_path, Path(out), settings)
    env = jinja2.Environment(loader=jinja2.PackageLoader("reports", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    script, script_hash = _script()
    html = env.get_template("dashboard.html.j2").render(
        v=view, script=script, labels={m: label(m) for m in DASHBOARD_METRICS},
        css=resources.files("reports").joinpath("templates/report.css.j2").read_text(encoding="utf-8"),
        csp=f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {script_hash}; "
            "base-uri 'none'; form-action 'none'",
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out
