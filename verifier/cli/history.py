"""``verifier history ...`` and ``verifier gate``: the commands a nightly job and a watching team use.

``verifier/cli/main.py`` attaches ``history_app`` as ``verifier history`` and ``gate`` as ``verifier gate``; the
functions here hold no logic of their own beyond argument handling and exit codes (history.py, drift.py and
gate.py do the work), so they can be tested through Typer's CliRunner.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from verifier import history as history_store
from verifier.history import HistoryError
from verifier.history.drift import DriftReport, detect_drift
from verifier.history.gate import DEFAULT_POLICY, Policy, PolicyError, evaluate, load_policy, to_junit, to_markdown

__all__ = ["gate", "history_app"]

history_app = typer.Typer(
    add_completion=False,
    help="Run history (a SQLite file or a PostgreSQL URL; default $VERIFIER_DB, else "
         "~/.local/share/verifier/history.sqlite) and drift.",
)
_out = Console()

# A string, not a Path: pathlib would fold the '//' of a postgresql:// URL (the history package repairs that too).
_DB_OPT = typer.Option(
    None, "--db", metavar="PATH|URL",
    help="History database: a SQLite file or postgresql://user@host:port/dbname (default $VERIFIER_DB, else "
         "~/.local/share/verifier/history.sqlite).")
_DRIFT_POLICY_OPT = typer.Option(None, "--policy",
                                 help="Policy TOML whose \\[drift] table sets the drift test (alpha, method, window).")


def _die(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"error: {message}", err=True)  # plain: an error is one line, never wrapped by rich
    raise typer.Exit(code)


def _policy(path: Path | None) -> Policy:
    """The policy TOML at ``path`` (the default policy when none is given); a bad file is one error line, exit 2."""
    try:
        return load_policy(path) if path else DEFAULT_POLICY
    except PolicyError as exc:
        _die(str(exc))


def _row(table: Table, *cells: str) -> None:
    """Add a row as plain text: names like "[toolcall-core]" must not be read as rich markup."""
    table.add_row(*(Text(c) for c in cells))


def _num(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"


@history_app.callback(invoke_without_command=True)
def history(
    ctx: typer.Context,
    db: str | None = _DB_OPT,
    endpoint: str | None = typer.Option(None, "--endpoint", "-e", help="Only this endpoint."),
    metric: str | None = typer.Option(None, "--metric", "-m", help="Only this metric (e.g. trigger_f1)."),
    suite: str | None = typer.Option(None, "--suite", "-s", help="Only this suite."),
    last: int = typer.Option(50, "--last", min=1, help="Show at most the newest N rows."),
) -> None:
    """Print the metric time series (one row per run x endpoint x suite x metric), oldest first."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        df = history_store.load_frame(db, endpoint=endpoint, metric=metric, suite=suite)
    except HistoryError as exc:
        _die(str(exc))
    if df.empty:
        _out.print("no matching rows in the history database", markup=False)
        return
    df = df.tail(last)
    table = Table(title=Text(f"history: {history_store.describe_db(db)}"))
    for col in ("started", "run", "endpoint", "suite", "metric", "value", "95% CI", "n"):
        table.add_column(col, justify="right" if col in ("value", "n") else "left")
    for row in df.itertuples(index=False):
        has_ci = row.ci_low is not None and not math.isnan(row.ci_low)
        ci = f"[{_num(row.ci_low)}, {_num(row.ci_high)}]" if has_ci else "-"
        _row(
            table,
            str(row.started_at), str(row.run_id), str(row.endpoint), str(row.suite), str(row.metric),
            _num(row.value), ci, str(row.n),
        )
    _out.print(table)


@history_app.command("index")
def index(
    run_dir: Path = typer.Argument(..., help="A run folder with summary.json."),
    db: str | None = _DB_OPT,
) -> None:
    """Add (or re-add) a run folder to the history database."""
    try:
        n = history_store.index_run(run_dir, db)
    except HistoryError as exc:
        _die(str(exc))
    _out.print(f"indexed {n} metric rows from {run_dir} into {history_store.describe_db(db)}", markup=False)


def _drift_for(run_dir: Path, db: str | None, policy: Policy) -> DriftReport | None:
    loc = history_store.resolve_db(db)  # a bad --db is an error here, not "no history"
    if not loc.exists():
        return None
    return detect_drift(history_store.load_summary(run_dir), loc, policy.drift)


@history_app.command("drift")
def drift(
    run_dir: Path = typer.Argument(..., help="The run to test (its own rows in the db are ignored)."),
    db: str | None = _DB_OPT,
    policy: Path | None = _DRIFT_POLICY_OPT,
) -> None:
    """Test a run's metrics against each endpoint's own recent history; exit 1 when drift is detected."""
    pol = _policy(policy)
    try:
        rep = _drift_for(run_dir, db, pol)
    except HistoryError as exc:
        _die(str(exc))
    if rep is None:
        _die(f"{history_store.describe_db(db)}: no history database here")
    table = Table(title=Text(f"drift: run {rep.run_id}"))
    for col in ("endpoint", "suite", "metric", "basis", "tonight", "history mean", "sd", "runs", "adj. p", "drift"):
        table.add_column(col)
    for t in rep.tests:
        _row(table, t.endpoint, t.suite, t.metric, t.basis, _num(t.current), _num(t.history_mean), _num(t.sd_used),
                      str(t.n_history), f"{t.p_adjusted:.3g}", "DRIFT" if t.drift else "")
    _out.print(table)
    _out.print(rep.statement, markup=False)
    if rep.untested:
        _out.print(f"{len(rep.untested)} series not tested (e.g. {rep.untested[0]})", markup=False)
    raise typer.Exit(1 if rep.drifted else 0)


@history_app.command("report")
def report(
    run_dir: Path = typer.Argument(..., help="A run folder with summary.json."),
    db: str | None = _DB_OPT,
    policy: Path | None = typer.Option(None, "--policy", help="Policy TOML for the pass/warn/fail marks."),
) -> None:
    """Re-render report.html with the history charts and drift table from the database."""
    from reports.render import render_report  # lazy: matplotlib is only needed when a report is drawn

    pol = _policy(policy) if policy else None  # None: the report's own default (drift untested without a db)
    try:
        loc = history_store.resolve_db(db)
        if not history_store.history_exists(loc):
            _die(f"{loc}: no history database here")
        out = render_report(run_dir, db_path=loc, policy=pol)
    except HistoryError as exc:
        _die(str(exc))
    _out.print(str(out), markup=False, highlight=False)


@history_app.command("dashboard")
def dashboard(
    out: Path = typer.Option(..., "--out", help="Where to write the dashboard page (one self-contained HTML file)."),
    db: str | None = _DB_OPT,
    policy: Path | None = _DRIFT_POLICY_OPT,
) -> None:
    """One page over the whole history: headline metrics over time per endpoint, drift marks, verdicts, report links."""
    from reports.dashboard import DASHBOARD_METRICS, render_dashboard  # lazy: matplotlib only when drawing

    pol = _policy(policy)
    try:
        if not history_store.history_exists(db):
            _die(f"{history_store.describe_db(db)}: no history database here")
        written = render_dashboard(db, out, pol.drift.model_copy(update={"metrics": DASHBOARD_METRICS}))
    except HistoryError as exc:
        _die(str(exc))
    except OSError as exc:
        _die(f"{out}: cannot write the dashboard ({exc.strerror or exc})")
    _out.print(str(written), markup=False, highlight=False)


def gate(
    run_dir: Path = typer.Argument(..., help="A run folder with summary.json."),
    policy: Path | None = typer.Option(None, "--policy", help="Policy TOML (default: examples/policy.toml values)."),
    db: str | None = _DB_OPT,
    junit: Path | None = typer.Option(None, "--junit",
                                         help="Write JUnit XML here (one testcase per endpoint x check)."),
    markdown: Path | None = typer.Option(None, "--markdown",
                                            help="Write a Markdown summary here (CI job summary / PR comment)."),
) -> None:
    """Judge a run against a policy: exit 0 pass, 1 fail, 2 error (bad policy or run folder)."""
    pol = _policy(policy)
    try:
        summary = history_store.load_summary(run_dir)
        rep = _drift_for(run_dir, db, pol) if not pol.allow_drift else None
    except HistoryError as exc:
        _die(str(exc))
    result = evaluate(summary, pol, rep)
    md = to_markdown(result)
    try:
        if junit:
            junit.parent.mkdir(parents=True, exist_ok=True)
            junit.write_text(to_junit(result), encoding="utf-8")
        if markdown:
            markdown.parent.mkdir(parents=True, exist_ok=True)
            markdown.write_text(md, encoding="utf-8")
    except OSError as exc:
        _die(f"cannot write gate output: {exc}")
    table = Table(title=Text(f"gate: {result.status.upper()} ({result.decision})"))
    for col in ("endpoint", "check", "result", "detail"):
        table.add_column(col)
    for c in result.checks:
        _row(table, c.endpoint, c.name, c.status, c.message)
    _out.print(table)
    raise typer.Exit(result.exit_code)
