"""Writing runs into the history: a run folder's summary becomes one ``runs`` row and its ``metrics`` rows.

Indexing is idempotent and safe under concurrent writers. In one transaction: upsert the ``runs`` row on its
primary key ``run_id`` (which also locks it on PostgreSQL, so a second writer of the *same* run waits for the
first to commit), delete that run's metric rows, insert the new ones. Two writers of different runs never
touch the same rows; two writers of the same run leave exactly one copy (the later one's). A *different* run
under an id already taken (a copied folder, or an older version's folder-name id) is refused rather than allowed to
replace it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.dialects import postgresql, sqlite

from verifier.history.engine import connect_for_write
from verifier.history.location import DbArg, resolve_db
from verifier.history.model import HistoryError
from verifier.history.schema import costs, metrics, runs
from verifier.run.summary import RunSummary, SummaryFileError

__all__ = ["cost_rows", "index_run", "index_summary", "load_summary", "metric_rows"]


def load_summary(run_dir: Path) -> RunSummary:
    """Read ``run_dir/summary.json`` into a RunSummary, with a one-line error naming the file and field."""
    try:
        return RunSummary.read(run_dir)
    except SummaryFileError as exc:
        raise HistoryError(str(exc)) from exc


def metric_rows(summary: RunSummary) -> list[dict[str, Any]]:
    """The ``metrics`` rows of one run: each metric (basis 'value') and each comparison (basis 'vs_reference')."""
    hashes = {m.name: m.content_hash for m in summary.suites}
    rows: list[dict[str, Any]] = []
    for r in summary.results:
        common = {"run_id": summary.run_id, "started_at": summary.started_at, "endpoint": r.endpoint,
                  "is_reference": bool(r.is_reference), "suite": r.suite, "suite_hash": hashes.get(r.suite),
                  "kind": r.kind}
        for name, iv in r.metrics.items():
            rows.append({**common, "basis": "value", "metric": name, "value": iv.value, "ci_low": iv.low,
                         "ci_high": iv.high, "n": iv.n, "method": iv.method, "p_value": None})
        for name, comp in r.comparisons.items():
            d = comp.difference
            rows.append({**common, "basis": "vs_reference", "metric": comp.metric or name, "value": d.value,
                         "ci_low": d.low, "ci_high": d.high, "n": d.n, "method": d.method, "p_value": comp.p_value})
    # one row per primary key: a later duplicate (two comparisons naming one metric) replaces the earlier,
    # as the version-1 code's INSERT OR REPLACE did
    unique = {(r["endpoint"], r["suite"], r["basis"], r["metric"]): r for r in rows}
    return list(unique.values())


def cost_rows(summary: RunSummary) -> list[dict[str, Any]]:
    """The ``costs`` rows of one run: per endpoint and suite, the reported tokens and their USD."""
    hashes = {m.name: m.content_hash for m in summary.suites}
    return [{"run_id": summary.run_id, "started_at": summary.started_at, "endpoint": endpoint, "suite": suite,
             "suite_hash": hashes.get(suite), "requests": c.requests, "with_usage": c.with_usage,
             "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
             "cached_tokens": c.cached_tokens, "usd": c.usd}
            for endpoint, cost in summary.cost.items() for suite, c in cost.suites.items()]


def index_summary(summary: RunSummary, db_path: DbArg = None, *, run_dir: Path | None = None) -> int:
    """Index one RunSummary; replaces any earlier indexing of the same run_id. Returns the metric rows written."""
    loc = resolve_db(db_path)
    rows = metric_rows(summary)
    run_row = {
        "run_id": summary.run_id,
        "started_at": summary.started_at,
        "finished_at": summary.finished_at,
        "verifier_version": summary.verifier_version,
        "reference": summary.reference,
        "run_dir": str(Path(run_dir).resolve()) if run_dir is not None else None,
        "indexed_at": time.time(),
    }
    with connect_for_write(loc) as conn:
        _upsert_run(conn, run_row, loc.display)
        conn.execute(metrics.delete().where(metrics.c.run_id == summary.run_id))
        if rows:
            conn.execute(metrics.insert(), rows)
        conn.execute(costs.delete().where(costs.c.run_id == summary.run_id))
        spent = cost_rows(summary)
        if spent:
            conn.execute(costs.insert(), spent)
    return len(rows)


def index_run(run_dir: Path, db_path: DbArg = None) -> int:
    """Index ``run_dir/summary.json`` into the history database (called by ``verifier run`` after each run)."""
    return index_summary(load_summary(Path(run_dir)), db_path, run_dir=Path(run_dir))


def _upsert_run(conn: Connection, row: dict[str, Any], where: str) -> None:
    """Insert the run, or update it if this run (same id *and* start time) is already there.

    A row with the same id but another start time is a different run whose folder had the same name (two
    matrix jobs writing ``runs/nightly`` into one shared history): replacing it would silently lose that run,
    so it is refused instead, naming both start times.
    """
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(runs).values(**row)
    updates = {c: stmt.excluded[c] for c in row if c != "run_id"}
    conn.execute(stmt.on_conflict_do_update(index_elements=[runs.c.run_id], set_=updates,
                                            where=runs.c.started_at == stmt.excluded.started_at))
    # read back rather than trust rowcount (not reported for upserts by every driver): the row is ours now
    # (SQLite: we hold the write lock; PostgreSQL: ON CONFLICT locked it), so this sees the stored run
    other = conn.execute(select(runs.c.started_at).where(runs.c.run_id == row["run_id"])).scalar()
    if other != row["started_at"]:
        raise HistoryError(f"{where}: run_id '{row['run_id']}' is already indexed from another run (started {other}; "
                           f"this one {row['started_at']}). A run id is unique per run (folder name, start time, "
                           f"random suffix), so one of them is a copied run folder or was written by an older version "
                           f"that used the folder's name: index only one of them.")
