"""History in a real PostgreSQL server (the temporary cluster of ``conftest.py``), side by side with SQLite.

What must hold on both backends: the same schema and version row, the same frames from the same runs, drift,
gate and the report's history section through ``--db URL``, concurrent writers losing and doubling nothing, and
the URL's password never printed or stored.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import psycopg
import pytest
import typer
from typer.testing import CliRunner

from tests.history.conftest import PG_PASSWORD
from tests.report.fixtures import make_summary, write_run
from verifier.cli.history import gate, history_app
from verifier.history import (
    SCHEMA_VERSION,
    HistoryError,
    index_run,
    index_summary,
    load_frame,
    load_points,
    resolve_db,
)
from verifier.history.drift import DriftSettings, detect_drift
from verifier.run.summary import RunSummary

pytestmark = pytest.mark.slow  # real processes (PostgreSQL, a killed run) take seconds: the quick subset skips them

REPO = Path(__file__).resolve().parents[2]



def _nights(db: str | Path, count: int) -> None:
    for night in range(count):
        s, _ = make_summary(run_id=f"n{night:02d}", started_at=f"2026-01-{night + 1:02d}T02:00:00Z", seed=100 + night,
                            n=300)
        index_summary(s, db)


def _app() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(history_app, name="history")
    app.command(name="gate")(gate)
    return app


def _invoke(args: list[str], **kw):
    return CliRunner().invoke(_app(), args, env={"COLUMNS": "220", **kw.pop("env", {})}, **kw)


def test_schema_and_version_are_created_in_postgres(pg_url: str) -> None:
    assert load_frame(pg_url, basis=None).empty  # a fresh database reads as an empty history...
    with psycopg.connect(pg_url) as conn:  # ...and reading created nothing: only writers create or migrate
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
    s, _ = make_summary(n=60)
    n = index_summary(s, pg_url)
    with psycopg.connect(pg_url) as conn:
        version = conn.execute("SELECT value FROM schema_info WHERE name = 'schema_version'").fetchone()
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        metrics = conn.execute("SELECT count(*) FROM metrics").fetchone()[0]
        collations = {r[0] for r in conn.execute(
            "SELECT collation_name FROM information_schema.columns WHERE table_name = 'metrics' "
            "AND data_type = 'text'")}
    assert version == (str(SCHEMA_VERSION),)
    assert (runs, metrics) == (1, n) and n > 0
    assert collations == {"C"}  # bytewise ordering, as SQLite's, whatever the server's default locale


def test_same_runs_give_the_same_frame_on_sqlite_and_postgres(pg_url: str, tmp_path: Path) -> None:
    sqlite_db = tmp_path / "h.sqlite"
    for db in (sqlite_db, pg_url):
        _nights(db, 4)
    for filters in ({"basis": None}, {"endpoint": "fp8-kv", "metric": "schema_accuracy"}, {"basis": "vs_reference"}):
        a, b = load_frame(sqlite_db, **filters), load_frame(pg_url, **filters)
        assert len(a) > 0
        pd.testing.assert_frame_equal(a, b)
    assert load_points(sqlite_db, basis=None) == load_points(pg_url, basis=None)


def test_reindexing_a_run_replaces_it_in_postgres(pg_url: str, tmp_path: Path) -> None:
    s, r = make_summary(n=60)
    run = write_run(tmp_path / "run", s, r)
    first = index_run(run, pg_url)
    assert index_run(run, pg_url) == first
    assert len(load_frame(pg_url, basis=None)) == first
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*), min(run_dir) FROM runs").fetchone() == (1, str(run.resolve()))


def _run_folders(tmp_path: Path, prefix: str, count: int, base: RunSummary) -> list[Path]:
    out = []
    for i in range(count):
        s = base.model_copy(update={"run_id": f"{prefix}-{i:02d}", "started_at": f"2026-03-{i + 1:02d}T02:00:00Z"})
        out.append(write_run(tmp_path / "runs" / s.run_id, s))
    return out


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_processes_indexing_at_once_lose_and_double_nothing(backend: str, tmp_path: Path,
                                                                 request: pytest.FixtureRequest) -> None:
    """Two nightly jobs finishing together: separate processes, one database, writes overlapping in time.

    Each process indexes 8 runs of its own and one run both index (the same run_id at once must end as one copy).
    """
    db = request.getfixturevalue("pg_url") if backend == "postgresql" else str(tmp_path / "shared.sqlite")
    base, _ = make_summary(n=60)
    per_run = len(load_rows_expected(base))
    shared = _run_folders(tmp_path, "shared", 1, base)
    # the shared run first in both: the two writers reach the same run_id at the same moment
    jobs = {name: [*shared, *_run_folders(tmp_path, name, 8, base)] for name in ("job-a", "job-b")}
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = {
        name: subprocess.Popen([sys.executable, str(REPO / "tests/history/index_worker.py"), db, str(go),
                                str(tmp_path / f"{name}.times"), *map(str, runs)],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, runs in jobs.items()
    }
    deadline = time.monotonic() + 60  # both import verifier.history, say so, and wait at the barrier
    while not all((tmp_path / f"{name}.times.ready").exists() for name in jobs):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs.values()), "workers did not start"
        time.sleep(0.02)
    go.touch()
    for name, p in procs.items():
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, f"{name}: {err[-2000:]}"
    times = [json.loads((tmp_path / f"{name}.times").read_text()) for name in jobs]
    assert times[0]["start"] < times[1]["end"] and times[1]["start"] < times[0]["end"], "writers did not overlap"
    assert all(set(t["rows"].values()) == {per_run} for t in times)

    frame = load_frame(db, basis=None)
    expected_runs = {f"{name}-{i:02d}" for name in jobs for i in range(8)} | {"shared-00"}
    counts = frame.groupby("run_id").size()
    assert set(counts.index) == expected_runs  # nothing lost
    assert set(counts.values) == {per_run}  # nothing doubled, the shared run included
    keys = ["run_id", "endpoint", "suite", "basis", "metric"]
    assert not frame.duplicated(keys).any()
    if backend == "sqlite":
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == len(expected_runs)
    else:
        with psycopg.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == len(expected_runs)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_one_run_indexed_by_two_writers_at_once_stays_one_copy(backend: str, tmp_path: Path,
                                                               request: pytest.FixtureRequest) -> None:
    """The same run re-indexed from two threads (each call its own engine and transaction), 8 times each."""
    db = request.getfixturevalue("pg_url") if backend == "postgresql" else str(tmp_path / "shared.sqlite")
    base, _ = make_summary(n=60)
    index_summary(base.model_copy(update={"run_id": "other"}), db)  # schema in place: the writers start at once
    barrier = threading.Barrier(2, timeout=30)

    def writer() -> None:
        barrier.wait()
        for _ in range(8):
            index_summary(base, db)

    with ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(writer) for _ in range(2)]:
            f.result(timeout=120)
    frame = load_frame(db, basis=None)
    assert (frame["run_id"] == base.run_id).sum() == len(load_rows_expected(base))
    assert (frame["run_id"] == "other").sum() == len(load_rows_expected(base))


def load_rows_expected(summary: RunSummary) -> list:
    from verifier.history.indexing import metric_rows

    return metric_rows(summary)


def test_drift_gate_and_report_through_a_postgres_url(pg_url: str, tmp_path: Path) -> None:
    _nights(pg_url, 6)
    s, r = make_summary(run_id="tonight", started_at="2026-02-01T02:00:00Z", seed=5, n=300,
                        schema_p={"ref": 0.99, "fp8-kv": 0.75, "int4-decode": 0.90})
    run = write_run(tmp_path / "run", s, r)
    # the library call: the same verdict as on a SQLite history with the same rows
    sqlite_db = tmp_path / "h.sqlite"
    _nights(sqlite_db, 6)
    pg_rep, sq_rep = detect_drift(s, pg_url, DriftSettings()), detect_drift(s, sqlite_db, DriftSettings())
    assert pg_rep.model_dump() == sq_rep.model_dump() and pg_rep.drifted

    outputs = []
    res = _invoke(["history", "index", str(run), "--db", pg_url])
    assert res.exit_code == 0 and "indexed" in res.output, res.output
    outputs.append(res.output)
    res = _invoke(["history", "--db", pg_url, "--endpoint", "fp8-kv", "--metric", "schema_accuracy"])
    assert res.exit_code == 0 and res.output.count("fp8-kv") == 7, res.output
    outputs.append(res.output)
    res = _invoke(["history", "drift", str(run), "--db", pg_url])
    assert res.exit_code == 1 and "DRIFT" in res.output, res.output
    outputs.append(res.output)
    res = _invoke(["gate", str(run), "--db", pg_url])
    assert res.exit_code == 1 and "drift" in res.output.lower(), res.output
    outputs.append(res.output)
    res = _invoke(["history", "report", str(run), "--db", pg_url])
    assert res.exit_code == 0, res.output
    outputs.append(res.output)
    html = (run / "report.html").read_text()
    assert 'id="history"' in html and '<span class="mark fail">drift</span>' in html
    port = resolve_db(pg_url).url.port
    assert f"postgresql://***@127.0.0.1:{port}/" in html  # the report names the database, without credentials
    # $VERIFIER_DB may hold the URL instead of --db
    res = _invoke(["history", "--endpoint", "fp8-kv", "--metric", "schema_accuracy"], env={"VERIFIER_DB": pg_url})
    assert res.exit_code == 0 and res.output.count("fp8-kv") == 7, res.output
    outputs.append(res.output)
    for text in [*outputs, html]:
        assert PG_PASSWORD not in text and "s3cr" not in text


def test_verifier_run_indexes_into_postgres_and_keeps_the_password_out(pg_url: str, tmp_path: Path,
                                                                      scripted_server) -> None:
    from verifier.cli import app
    from verifier.testing import schema_responder

    srv = scripted_server(schema_responder)
    suite = REPO / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"
    mini = tmp_path / "mini.jsonl"
    mini.write_text("\n".join(suite.read_text().splitlines()[:6]) + "\n")
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--reference", f"ref={srv.base_url}", "--endpoint", f"cand={srv.base_url}",
                                   "--suite", str(mini), "--out", str(out), "--db", pg_url, "--quiet"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    run_id = RunSummary.model_validate_json((out / "summary.json").read_text()).run_id
    frame = load_frame(pg_url, basis=None)
    assert set(frame["run_id"]) == {run_id} and set(frame["endpoint"]) == {"ref", "cand"}
    html = (out / "report.html").read_text()
    assert '<section id="history">' in html
    for p in out.rglob("*"):
        if p.is_file():
            assert PG_PASSWORD.encode() not in p.read_bytes() and b"s3cr" not in p.read_bytes(), p
    assert "s3cr" not in res.output
    # and `verifier report --db URL` re-renders with the history section
    res = CliRunner().invoke(app, ["report", str(out), "--db", pg_url], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert '<section id="history">' in (out / "report.html").read_text()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_another_run_under_a_taken_run_id_is_refused_not_replaced(backend: str, tmp_path: Path,
                                                                   request: pytest.FixtureRequest) -> None:
    """Two matrix jobs that both wrote ``runs/nightly``: the second must not silently replace the first."""
    db = request.getfixturevalue("pg_url") if backend == "postgresql" else str(tmp_path / "h.sqlite")
    first, _ = make_summary(run_id="nightly", started_at="2026-03-01T02:00:00Z", n=60)
    second = first.model_copy(update={"started_at": "2026-03-01T02:00:07Z"})
    n = index_summary(first, db)
    with pytest.raises(HistoryError, match=r"run_id 'nightly' is already indexed from another run "
                                           r"\(started 2026-03-01T02:00:00Z; this one 2026-03-01T02:00:07Z\)"):
        index_summary(second, db)
    frame = load_frame(db, basis=None)
    assert len(frame) == n and set(frame["started_at"]) == {"2026-03-01T02:00:00Z"}  # the first run is intact


def test_password_from_pgpassword_instead_of_the_url(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """libpq's own PGPASSWORD works, so the URL itself (in a CI variable, say) need not hold the secret."""
    loc = resolve_db(pg_url)
    bare = f"postgresql://{loc.url.username}@127.0.0.1:{loc.url.port}/{loc.url.database}"
    s, _ = make_summary(n=60)
    monkeypatch.setenv("PGPASSWORD", "wrong")
    with pytest.raises(HistoryError, match="cannot connect to the history database"):
        index_summary(s, bare)
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    assert index_summary(s, bare) == len(load_frame(pg_url, basis=None)) > 0


def test_dashboard_draws_the_same_page_from_postgres_as_from_sqlite(pg_url: str, tmp_path: Path) -> None:
    """The dashboard reads runs and metrics through the history API (no SQLite-only query): runs indexed into a
    PostgreSQL server with their folders get the same report links as in a SQLite file, and the page names the
    server without its password."""
    from tests.report.fixtures import build_history
    from verifier.history import index_summary, load_runs, load_summary

    sqlite_db = build_history(tmp_path, 12, folders=2)
    for entry in load_runs(sqlite_db):  # copy the same runs, folders included, into the server
        folder = Path(entry.run_dir) if entry.run_dir else None
        summary = load_summary(folder) if folder else None
        if summary is None:
            continue
        index_summary(summary, pg_url, run_dir=folder)
    assert [r.run_dir for r in load_runs(pg_url)] == [r.run_dir for r in load_runs(sqlite_db) if r.run_dir]

    pages = {}
    for name, db in (("pg", pg_url), ("sqlite", str(sqlite_db))):
        out = tmp_path / f"{name}.html"
        res = _invoke(["history", "dashboard", "--db", db, "--out", str(out)])
        assert res.exit_code == 0, res.output
        pages[name] = out.read_text(encoding="utf-8")
        assert PG_PASSWORD not in res.output and "s3cr" not in res.output
    assert PG_PASSWORD not in pages["pg"] and "s3cr" not in pages["pg"]
    for page in pages.values():
        assert page.count('<a href="./runs/') == 2 * 3  # two known folders, linked in each endpoint's table


def test_verifier_merge_indexes_into_postgres_by_url(pg_url: str, tmp_path: Path, scripted_server) -> None:
    """``verifier merge --db URL`` (the option once took a path, which folded ``postgresql://`` into
    ``postgresql:/`` and indexed into a local file of that name)."""
    from verifier.cli import app
    from verifier.testing import schema_responder

    srv = scripted_server(schema_responder)
    mini = tmp_path / "mini.jsonl"
    mini.write_text("\n".join((REPO / "suites" / "toolcall" / "data" / "toolcall-core.jsonl").read_text()
                              .splitlines()[:6]) + "\n")
    for i in (1, 2):
        res = CliRunner().invoke(app, ["run", "--reference", f"ref={srv.base_url}", "--endpoint",
                                       f"cand={srv.base_url}", "--suite", str(mini), "--out", str(tmp_path / f"s{i}"),
                                       "--shard", f"{i}/2", "--quiet", "--no-history"], catch_exceptions=False)
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out",
                                   str(tmp_path / "merged"), "--db", pg_url], catch_exceptions=False)
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    run_id = RunSummary.model_validate_json((tmp_path / "merged" / "summary.json").read_text()).run_id
    assert set(load_frame(pg_url, basis=None)["run_id"]) == {run_id}
    assert not any(p.name.startswith("postgresql") for p in Path.cwd().iterdir())
