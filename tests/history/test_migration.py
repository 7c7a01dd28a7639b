"""A history file written by the version-1 code (tests/history/data/history-v1.sql) opens, migrates and keeps
every row; locations (paths, URLs) resolve and print without credentials; an unreachable server is one line."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.report.fixtures import make_summary
from verifier.cli.history import history_app
from verifier.history import (
    SCHEMA_VERSION,
    HistoryError,
    default_db_path,
    default_location,
    describe_db,
    index_summary,
    load_frame,
    redact_db_text,
    resolve_db,
)
from verifier.history.drift import DriftSettings, detect_drift

V1_DUMP = Path(__file__).parent / "data" / "history-v1.sql"
_V1_QUERY = "SELECT * FROM metrics ORDER BY run_id, endpoint, suite, basis, metric"


def _v1_file(tmp_path: Path) -> Path:
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as conn:
        conn.executescript(V1_DUMP.read_text())
    return db


def _version(db: Path) -> tuple[int, list]:
    with sqlite3.connect(db) as conn:
        info = (conn.execute("SELECT value FROM schema_info WHERE name = 'schema_version'").fetchall()
                if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_info'").fetchall() else [])
        return conn.execute("PRAGMA user_version").fetchone()[0], info


def test_version_1_file_is_read_as_is_and_migrated_by_the_first_write_keeping_every_row(tmp_path: Path) -> None:
    db = _v1_file(tmp_path)
    with sqlite3.connect(db) as conn:
        before = conn.execute(_V1_QUERY).fetchall()
        runs_before = conn.execute("SELECT * FROM runs ORDER BY run_id").fetchall()
    assert _version(db) == (1, [])
    frame = load_frame(db, basis=None)
    assert len(frame) == len(before) == 246 and frame["is_reference"].dtype == bool
    # reading never writes: an older verifier sharing this file can still use it
    assert _version(db) == (1, [])
    s, _ = make_summary(run_id="v2-first", started_at="2026-02-01T02:00:00Z", n=60)
    n = index_summary(s, db)
    assert _version(db) == (SCHEMA_VERSION, [(str(SCHEMA_VERSION),)])
    with sqlite3.connect(db) as conn:
        after = conn.execute(_V1_QUERY).fetchall()
        assert [r for r in after if r[0] != "v2-first"] == before  # the old rows untouched, value for value
        assert len(after) == len(before) + n
        assert [r for r in conn.execute("SELECT * FROM runs ORDER BY run_id") if r[0] != "v2-first"] == runs_before


def test_database_without_tables_reads_as_empty_history(tmp_path: Path) -> None:
    """A database without history tables yet (a fresh server database, an empty file) reads as no rows."""
    db = tmp_path / "empty.sqlite"
    sqlite3.connect(db).close()
    assert load_frame(db, basis=None).empty
    assert _version(db) == (0, [])


def test_migrated_file_takes_new_runs_and_tests_drift_against_old_ones(tmp_path: Path) -> None:
    db = _v1_file(tmp_path)
    worse, _ = make_summary(run_id="tonight", started_at="2026-02-01T02:00:00Z", seed=999, n=300,
                            schema_p={"ref": 0.99, "fp8-kv": 0.80, "int4-decode": 0.90})
    rep = detect_drift(worse, db, DriftSettings())  # the six v1 nights are the history
    assert all(t.n_history == 6 for t in rep.tests)
    assert ("fp8-kv", "schema_accuracy", "value") in {(t.endpoint, t.metric, t.basis) for t in rep.drifted}
    n = index_summary(worse, db)
    assert len(load_frame(db, basis=None)) == 246 + n
    assert sorted(load_frame(db)["run_id"].unique())[-1] == "v1-n05"  # byte order: "tonight" < "v1-..."


def test_newer_schema_is_refused_not_misread(tmp_path: Path) -> None:
    db = _v1_file(tmp_path)
    index_summary(make_summary(run_id="x", n=60)[0], db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE schema_info SET value = '7' WHERE name = 'schema_version'")
    with pytest.raises(HistoryError, match=r"old\.sqlite: history schema version 7 is newer"):
        load_frame(db)


def test_locations_resolve_and_print_without_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql://alice:pa%40ss%2Fword@db.example:6543/history?sslmode=require&password=other"
    loc = resolve_db(url)
    assert loc.is_server and loc.url.drivername == "postgresql+psycopg"
    assert loc.url.password == "pa@ss/word" and loc.url.port == 6543
    assert loc.display == "postgresql://***@db.example:6543/history?password=***&sslmode=require"
    assert str(loc) == repr(loc).split("'")[1] == loc.display
    # a Path-typed CLI option folds '//' to '/': still the same server
    assert resolve_db(Path(url)).url == loc.url
    assert resolve_db("postgres://u@h/d").url.drivername == "postgresql+psycopg"
    assert resolve_db(tmp_path / "h.sqlite").path == tmp_path / "h.sqlite"
    assert resolve_db(f"sqlite:///{tmp_path}/x.sqlite").path == tmp_path / "x.sqlite"
    for bad, why in (("mysql://u:pw@h/d", "unsupported database URL"),
                     ("postgresql://u:pw@h:5432", "names no database")):
        with pytest.raises(HistoryError, match=why) as exc:
            resolve_db(bad)
        assert "pw" not in str(exc.value)
    assert describe_db("mysql://u:pw@h/d") == "mysql://***@h/d"
    assert redact_db_text("failed for postgresql://bob:hunter2@h/d?sslpassword=x2 now") == \
        "failed for postgresql://***@h/d?sslpassword=*** now"
    monkeypatch.setenv("VERIFIER_DB", url)
    assert default_location().url == loc.url
    with pytest.raises(HistoryError, match=r"\$VERIFIER_DB is a database URL \(postgresql://\*\*\*@db"):
        default_db_path()


def test_unreachable_server_is_one_line_without_the_password() -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://bob:TOPSECRET-PW@127.0.0.1:{port}/history"
    with pytest.raises(HistoryError) as exc:
        load_frame(url)
    msg = str(exc.value)
    assert msg.startswith(f"postgresql://***@127.0.0.1:{port}/history: cannot connect to the history database (")
    assert "\n" not in msg and "TOPSECRET" not in msg
    app = typer.Typer()
    app.add_typer(history_app, name="history")
    res = CliRunner().invoke(app, ["history", "--db", url])
    assert res.exit_code == 2 and "cannot connect" in res.output and "TOPSECRET" not in res.output
