"""The one place that composes run -> history index -> report.

Why here and not in the runner: the runner (``verifier.run``) measures and writes a run folder; indexing it into
the history database and drawing ``report.html`` read that folder afterwards. Keeping the composition at the
top means ``verifier.run`` never imports ``reports`` or the history database, and a library user who only wants
figures calls :func:`verifier.run.runner.execute_run` and gets nothing else.

Publishing never raises: a history database that is down or a renderer bug is a warning, because the run's
data is already safe on disk (``verifier report DIR`` draws the report again).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reports.chart_worker import ChartDrawer
from reports.render import load_view, write_report
from verifier import history as history_store
from verifier.history import HistoryError
from verifier.run.dry_run import CostPlan, HistoryMeans, dry_run
from verifier.run.errors import InputError
from verifier.run.merge import MergeSettings, merge_runs
from verifier.run.runner import RunOutcome, RunSettings, execute_run
from verifier.run.store import RunManifest, StoreError, _first_line

if TYPE_CHECKING:
    from verifier.history import DbArg

log = logging.getLogger(__name__)


@dataclass
class Publish:
    """What happens to a finished run folder: indexed into history (``db``: SQLite path or PostgreSQL URL, None
    for the default), and report.html drawn."""

    history: bool = True
    db: DbArg = None
    render: bool = True


def run_and_publish(settings: RunSettings, publish_to: Publish) -> RunOutcome:
    """``verifier run``: measure, then index and render. A shard is never indexed (its figures cover 1/N).

    The chart worker starts before measuring, so matplotlib is imported on another core while the run
    sends requests (:mod:`reports.chart_worker`); it is started before the run's event loop and threads exist.
    """
    publish_to = resumed_publish(settings, publish_to)
    settings.publish = publish_record(publish_to)
    with ChartDrawer(worker=publish_to.render) as drawer:
        outcome = execute_run(settings)
        history = publish_to.history
        shard = outcome.summary.settings.get("shard")
        if shard and history:
            # a shard's figures cover 1/N of each suite: beside whole runs in history they would read as drift
            outcome.warnings.append(f"shard {shard} not indexed into history; "
                                    "`verifier merge` indexes the merged run")
            history = False
        outcome.warnings += publish(outcome.run_dir, Publish(history=history, db=publish_to.db,
                                                             render=publish_to.render), drawer)
    return outcome


def publish_record(publish_to: Publish) -> dict[str, Any]:
    """What the manifest keeps of ``publish_to``, so ``--resume`` and ``verifier report`` do the same.

    Never a secret: a database URL's password (and other credentials) is replaced by ``***`` and marked, and the
    resume then asks for ``--db`` again instead of indexing into another database.
    """
    db = None if publish_to.db is None else str(publish_to.db)
    shown = history_store.redact_db_text(db) if db is not None else None
    return {"history": publish_to.history, "db": shown, "db_redacted": shown != db}


def resumed_publish(settings: RunSettings, given: Publish) -> Publish:
    """On ``--resume``, what the run was started with, unless a flag given now says otherwise.

    ``--no-history`` given now wins; not given, the run's own choice stands (a run started with ``--no-history``
    is not indexed by its resume). ``--db`` given now wins; not given, the run's database is used again, and one
    whose URL held a password (not stored) is an input error asking for ``--db``.
    """
    if settings.resume is None:
        return given
    try:
        recorded = RunManifest.load(Path(settings.resume)).settings.get("publish") or {}
    except StoreError:
        return given  # the runner reports a folder that is no run, under its lock
    history = given.history and bool(recorded.get("history", True))
    db = given.db
    if db is None and history and recorded.get("db") is not None:
        if recorded.get("db_redacted"):
            raise InputError(f"--resume: the run indexes into {recorded['db']}, whose credentials are not stored; "
                             "pass the same --db again (or --no-history)")
        db = recorded["db"]
    return Publish(history=history, db=db, render=given.render)


def merge_and_publish(settings: MergeSettings, publish_to: Publish) -> RunOutcome:
    """``verifier merge``: join the shards into one run folder, then index and render it like a whole run."""
    outcome = merge_runs(settings)
    outcome.warnings += publish(outcome.run_dir, publish_to)
    return outcome


def publish(run_dir: Path, publish_to: Publish, drawer: ChartDrawer | None = None) -> list[str]:
    """Index the finished run into history, then render report.html; returns warnings (never raises)."""
    warnings: list[str] = []
    # index first, so the report can chart this run beside the endpoint's history and test drift
    history_db: DbArg = None
    if publish_to.history:
        problems = index_history(run_dir, publish_to.db)
        warnings += problems
        if not problems:
            history_db = publish_to.db or _default_db()
    if publish_to.render:
        warnings += render(run_dir, history_db, drawer)
    return warnings


def render(run_dir: Path, db: DbArg = None, drawer: ChartDrawer | None = None) -> list[str]:
    """Write report.html (with the history section when ``db`` is given); a renderer bug is a warning, never a
    lost run. ``drawer``: the chart worker to draw with (in-process when None)."""
    try:
        view = load_view(Path(run_dir), db_path=db, drawer=drawer)  # analysis first: the typed view-model
        write_report(Path(run_dir), view)  # then drawing, which decides nothing
    except Exception as e:  # noqa: BLE001 - the run's data is safe on disk; say so and go on
        log.exception("report rendering failed")
        return [f"report.html not written: {type(e).__name__}: {_first_line(e)} "
                f"(retry with: verifier report {run_dir})"]
    return []


def index_history(run_dir: Path, db: DbArg) -> list[str]:
    """Index the run folder into the history database; a failure is one warning line without credentials."""
    try:
        history_store.index_run(Path(run_dir), db)
    except Exception as e:  # noqa: BLE001 - history is an index; the run folder is the record
        # describe_db: a PostgreSQL URL is shown without its credentials
        where = history_store.describe_db(db)
        return [f"run not indexed into history ({where}): {type(e).__name__}: {_first_line(e)}"]
    return []


def _default_db() -> DbArg:
    try:
        return history_store.default_location()  # $VERIFIER_DB (path or URL) or the default file
    except HistoryError:
        return None


def plan_cost(settings: RunSettings, publish_to: Publish) -> tuple[Path, CostPlan, list[str]]:
    """``verifier run --dry-run``: the cost plan, with completion tokens from the history where it has the suite.

    Returns the folder holding ``plan.json``, the plan, and warnings (a history that cannot be read is one).
    """
    warnings: list[str] = []
    db: DbArg = (publish_to.db or _default_db()) if publish_to.history else None

    def lookup(suite_hash: str, endpoint: str) -> HistoryMeans | None:
        if db is None:
            return None
        try:
            return history_store.cost_means(db, suite_hash, endpoint)
        except Exception as e:  # noqa: BLE001 - without history the plan uses its stated defaults
            msg = f"history not read ({history_store.describe_db(db)}): {type(e).__name__}: {_first_line(e)}"
            if msg not in warnings:
                warnings.append(msg)
            return None

    run_dir, plan = dry_run(settings, lookup)
    return run_dir, plan, warnings


def gate_outcome(run_dir: Path, db: DbArg = None) -> str:
    """One line: the gate's outcome under the policy in force (the default policy: each candidate judged by its
    verdict against the reference), as ``verifier gate`` would decide it and the report shows it."""
    from verifier.history.drift import detect_drift
    from verifier.history.gate import DEFAULT_POLICY, evaluate
    from verifier.run.summary import RunSummary

    summary = RunSummary.read(Path(run_dir))
    policy = DEFAULT_POLICY
    drift = None
    drift_note = "; drift not tested (no history database)"
    try:
        if db is not None and history_store.history_exists(db):
            drift = detect_drift(summary, db, policy.drift)
            drift_note = ""
    except HistoryError:  # a database that is down was already a warning of the run; the gate line still prints
        drift_note = "; drift not tested (history database unreachable)"
    if drift is None:  # drift cannot be tested: said so instead of a warn
        policy = policy.model_copy(update={"allow_drift": True})
    result = evaluate(summary, policy, drift)
    bad = [f"{c.endpoint} {c.name} {c.status}" for c in result.checks if c.status in ("fail", "warn")]
    why = f" ({'; '.join(bad)})" if bad else ""
    return f"gate: {result.status} under {result.policy}, judged by each candidate's verdict{why}{drift_note}"
