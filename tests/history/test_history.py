"""History database (real SQLite files) and drift detection through it, plus the `history` commands."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from tests.report.fixtures import make_summary, write_run
from verifier.cli.history import history_app
from verifier.history import HistoryError, default_db_path, index_run, index_summary, load_frame
from verifier.history.drift import DriftSettings, detect_drift


def _nights(db: Path, count: int, schema_p: dict[str, float] | None = None) -> None:
    for night in range(count):
        s, _ = make_summary(run_id=f"n{night:02d}", started_at=f"2026-01-{night + 1:02d}T02:00:00Z", seed=100 + night,
                            schema_p=schema_p, n=300)
        index_summary(s, db)


def test_index_run_writes_rows_pandas_reads(tmp_path: Path) -> None:
    s, r = make_summary()
    run = write_run(tmp_path / "run", s, r)
    db = tmp_path / "h.sqlite"
    n = index_run(run, db)
    expected = sum(len(x.metrics) + len(x.comparisons) for x in s.results)
    assert n == expected
    df = load_frame(db, endpoint="fp8-kv", metric="schema_accuracy")
    assert list(df["suite"]) == ["toolcall-core"]
    row = df.iloc[0]
    iv = s.result("fp8-kv", "toolcall-core").metrics["schema_accuracy"]
    assert (row.value, row.ci_low, row.ci_high, row.n) == pytest.approx((iv.value, iv.low, iv.high, iv.n))
    assert row.suite_hash == "a" * 64
    # pandas can read it with nothing but the file path, as a user would
    with sqlite3.connect(db) as conn:
        raw = pd.read_sql_query("SELECT COUNT(*) AS c FROM metrics", conn)
    assert int(raw.c[0]) == expected


def test_reindex_is_idempotent(tmp_path: Path) -> None:
    s, r = make_summary()
    run = write_run(tmp_path / "run", s, r)
    db = tmp_path / "h.sqlite"
    index_run(run, db)
    index_run(run, db)
    assert len(load_frame(db, basis=None)) == index_run(run, db)


def test_default_db_path_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VERIFIER_DB", str(tmp_path / "x.sqlite"))
    assert default_db_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("VERIFIER_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "verifier" / "history.sqlite"


def test_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match=r"summary\.json: cannot read"):
        index_run(tmp_path / "nope", tmp_path / "h.sqlite")
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    s, _ = make_summary()
    with pytest.raises(HistoryError, match=r"bad\.sqlite: not a usable history database"):
        index_summary(s, bad)
    with pytest.raises(HistoryError, match=r"missing\.sqlite: no history database"):
        load_frame(tmp_path / "missing.sqlite")
    future = tmp_path / "future.sqlite"
    with sqlite3.connect(future) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(HistoryError, match=r"future\.sqlite: history schema version 99 is newer"):
        index_summary(s, future)


def test_stable_night_is_not_drift_and_a_drop_is(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    _nights(db, 8)
    settings = DriftSettings()
    same, _ = make_summary(run_id="same", started_at="2026-02-01T02:00:00Z", seed=999, n=300)
    rep = detect_drift(same, db, settings)
    assert rep.tests and not rep.drifted, [(t.endpoint, t.metric, t.p_adjusted) for t in rep.drifted]
    assert all(t.n_history == 8 for t in rep.tests)
    worse, _ = make_summary(run_id="worse", started_at="2026-02-01T02:00:00Z", seed=999, n=300,
                            schema_p={"ref": 0.99, "fp8-kv": 0.80, "int4-decode": 0.90})
    rep = detect_drift(worse, db, settings)
    flagged = {(t.endpoint, t.metric, t.basis) for t in rep.drifted}
    assert ("fp8-kv", "schema_accuracy", "value") in flagged
    assert all(e == "fp8-kv" for e, _, _ in flagged)
    assert "Holm" in rep.statement and "0.05" in rep.statement


def test_changed_suite_hash_is_not_compared(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    _nights(db, 6)
    s, _ = make_summary(run_id="new-suite", started_at="2026-02-01T02:00:00Z", n=300)
    s.suites[0].content_hash = "f" * 64
    rep = detect_drift(s, db, DriftSettings())
    assert not [t for t in rep.tests if t.suite == "toolcall-core"]
    assert any(u.startswith("fp8-kv/toolcall-core/schema_accuracy: 0 comparable runs") for u in rep.untested)


def _app() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(history_app, name="history")
    return app


def test_history_command_prints_series(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    _nights(db, 3)
    res = CliRunner().invoke(_app(), ["history", "--db", str(db), "--endpoint", "fp8-kv", "--metric", "trigger_f1"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert res.output.count("fp8-kv") == 3 and "n00" in res.output and "n02" in res.output
    assert "int4-decode" not in res.output
    res = CliRunner().invoke(_app(), ["history", "--db", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 2 and "no history database" in res.output


@pytest.mark.slow
def test_history_index_and_drift_commands(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    _nights(db, 6)
    s, r = make_summary(run_id="tonight", started_at="2026-02-01T02:00:00Z", seed=5, n=300,
                        schema_p={"ref": 0.99, "fp8-kv": 0.75, "int4-decode": 0.90})
    run = write_run(tmp_path / "run", s, r)
    res = CliRunner().invoke(_app(), ["history", "index", str(run), "--db", str(db)], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "indexed" in res.output
    res = CliRunner().invoke(_app(), ["history", "drift", str(run), "--db", str(db)], env={"COLUMNS": "200"})
    assert res.exit_code == 1, res.output
    assert "DRIFT" in res.output
    res = CliRunner().invoke(_app(), ["history", "report", str(run), "--db", str(db)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    html = (run / "report.html").read_text()
    assert 'id="history"' in html and '<span class="mark fail">drift</span>' in html
