"""Run history: every run's metrics indexed into one embedded SQLite database.

Why SQLite: nightly runs form a time series per (endpoint, suite, metric); a single file that needs no server
can be cached between CI jobs, and pandas reads it directly (``load_frame``). The run folder stays the source
of truth; the database is an index that ``index_run`` can rebuild at any time (re-indexing a run replaces
its rows, so it is idempotent).

Default location: ``$VERIFIER_DB`` if set, else ``$XDG_DATA_HOME/verifier/history.sqlite``, else
``~/.local/share/verifier/history.sqlite``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ValidationError

from verifier.summary_model import RunSummary

__all__ = [
    "HistoryError",
    "MetricPoint",
    "default_db_path",
    "index_run",
    "index_summary",
    "load_frame",
    "load_points",
    "load_summary",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    verifier_version TEXT,
    reference TEXT,
    run_dir TEXT,
    indexed_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    started_at TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    is_reference INTEGER NOT NULL,
    suite TEXT NOT NULL,
    suite_hash TEXT,
    kind TEXT NOT NULL,
    basis TEXT NOT NULL,          -- 'value' (the metric itself) or 'vs_reference' (candidate - reference)
    metric TEXT NOT NULL,
    value REAL,
    ci_low REAL,
    ci_high REAL,
    n INTEGER NOT NULL,
    method TEXT,
    p_value REAL,
    PRIMARY KEY (run_id, endpoint, suite, basis, metric)
);
CREATE INDEX IF NOT EXISTS metrics_series ON metrics(endpoint, suite, metric, basis, started_at);
"""


class HistoryError(Exception):
    """A history database or run folder that cannot be read; the message is one line naming the file."""


class MetricPoint(BaseModel):
    """One row of the history: a metric of one endpoint on one suite in one run."""

    run_id: str
    started_at: str
    endpoint: str
    is_reference: bool
    suite: str
    suite_hash: str | None
    kind: str
    basis: str
    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    method: str | None = None
    p_value: float | None = None


def default_db_path() -> Path:
    """Where history lives when no ``--db`` is given (documented in the module docstring)."""
    env = os.environ.get("VERIFIER_DB")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "verifier" / "history.sqlite"


#: Bumped on any incompatible change of the tables above; a newer database is refused rather than misread.
SCHEMA_VERSION = 1


def _connect(db_path: Path) -> sqlite3.Connection:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(db_path, timeout=30)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            conn.close()
            raise HistoryError(f"{db_path}: history schema version {version} is newer than this verifier's "
                               f"({SCHEMA_VERSION}); upgrade verifier")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.executescript(_SCHEMA)
        if version < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{db_path}: not a usable history database ({exc})") from exc
    return conn


def load_summary(run_dir: Path) -> RunSummary:
    """Read ``run_dir/summary.json`` into a RunSummary, with a one-line error naming the file and field."""
    path = Path(run_dir) / "summary.json"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HistoryError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    try:
        return RunSummary.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        raise HistoryError(f"{path}: field {loc}: {err['msg']}") from exc


def _rows(summary: RunSummary) -> list[tuple]:
    hashes = {m.name: m.content_hash for m in summary.suites}
    rows: list[tuple] = []
    for r in summary.results:
        common = (summary.run_id, summary.started_at, r.endpoint, int(r.is_reference), r.suite, hashes.get(r.suite), r.kind)
        for name, iv in r.metrics.items():
            rows.append((*common, "value", name, iv.value, iv.low, iv.high, iv.n, iv.method, None))
        for name, comp in r.comparisons.items():
            d = comp.difference
            rows.append((*common, "vs_reference", comp.metric or name, d.value, d.low, d.high, d.n, d.method, comp.p_value))
    return rows


def index_summary(summary: RunSummary, db_path: Path | None = None, *, run_dir: Path | None = None) -> int:
    """Index one RunSummary; replaces any earlier indexing of the same run_id. Returns the metric rows written."""
    db_path = Path(db_path) if db_path is not None else default_db_path()
    rows = _rows(summary)
    with closing(_connect(db_path)) as conn, conn:
        conn.execute("DELETE FROM metrics WHERE run_id = ?", (summary.run_id,))
        conn.execute("DELETE FROM runs WHERE run_id = ?", (summary.run_id,))
        conn.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                summary.run_id,
                summary.started_at,
                summary.finished_at,
                summary.verifier_version,
                summary.reference,
                str(Path(run_dir).resolve()) if run_dir is not None else None,
                time.time(),
            ),
        )
        conn.executemany("INSERT OR REPLACE INTO metrics VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    return len(rows)


def index_run(run_dir: Path, db_path: Path | None = None) -> int:
    """Index ``run_dir/summary.json`` into the history database (called by ``verifier run`` after each run)."""
    return index_summary(load_summary(Path(run_dir)), db_path, run_dir=Path(run_dir))


def load_frame(
    db_path: Path | None = None,
    *,
    endpoint: str | None = None,
    metric: str | None = None,
    suite: str | None = None,
    basis: str | None = "value",
) -> pd.DataFrame:
    """The history as a pandas DataFrame, oldest first; filters are exact matches, ``None`` means all."""
    db_path = Path(db_path) if db_path is not None else default_db_path()
    if not db_path.exists():
        raise HistoryError(f"{db_path}: no history database here (run `verifier run` or `verifier history index` first)")
    clauses, params = [], []
    for col, val in (("endpoint", endpoint), ("metric", metric), ("suite", suite), ("basis", basis)):
        if val is not None:
            clauses.append(f"{col} = ?")
            params.append(val)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    sql = f"SELECT * FROM metrics {where} ORDER BY started_at, run_id, endpoint, suite, metric"
    with closing(_connect(db_path)) as conn:
        df = pd.read_sql_query(sql, conn, params=params)
    df["is_reference"] = df["is_reference"].astype(bool)
    return df


def load_points(db_path: Path | None = None, **filters: str | None) -> list[MetricPoint]:
    """Typed rows for code that crosses module boundaries (drift, report)."""
    df = load_frame(db_path, **filters)
    records = json.loads(df.to_json(orient="records"))
    return [MetricPoint.model_validate(r) for r in records]
