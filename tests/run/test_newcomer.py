"""A newcomer's first hour (issue 39): unique run ids, progress in a log, --resume keeping its settings, and
--endpoint without --reference. Every test drives ``verifier run`` against a real loopback server."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.cli.compose import index_history
from verifier.run.store import RunManifest, shorten_at_sentence
from verifier.testing import schema_responder

CORE = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"


def _suite(tmp_path: Path, n: int) -> Path:
    p = tmp_path / "mini.jsonl"
    p.write_text("\n".join(CORE.read_text().splitlines()[:n]) + "\n")
    return p


def _run(args: list[str]):
    return CliRunner().invoke(app, ["run", *args], catch_exceptions=False)


def _indexed_runs(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as con:
        return con.execute("select run_id, run_dir from runs order by started_at, run_id").fetchall()


@pytest.mark.slow
def test_two_clones_writing_runs_default_both_land_in_one_history(tmp_path, scripted_server) -> None:
    srv = scripted_server(schema_responder)
    suite, db = _suite(tmp_path, 3), tmp_path / "shared.sqlite"
    ids = []
    for clone in ("clone-a", "clone-b", "clone-a-again"):
        out = tmp_path / clone / "runs" / "default"
        res = _run(["--reference", f"ref={srv.base_url}", "--endpoint", f"cand={srv.base_url}", "--suite", str(suite),
                    "--out", str(out), "--db", str(db), "-q"])
        assert res.exit_code == 0, res.stderr
        assert "warning" not in res.stderr, res.stderr  # no "not indexed" warning
        ids.append(RunManifest.load(out).run_id)
        assert json.loads((out / "summary.json").read_text())["run_id"] == ids[-1]
    assert len(set(ids)) == 3 and all(i.startswith("default-") for i in ids), ids
    assert sorted(r for r, _ in _indexed_runs(db)) == sorted(ids)


@pytest.mark.slow
def test_a_run_id_conflict_warning_is_whole_and_resume_keeps_the_id(tmp_path, scripted_server) -> None:
    """A copied run folder (the one way an id can repeat now) is refused with the whole explanation, not 200
    characters of it; --resume keeps the run's id (re-indexing the same run replaces it)."""
    srv = scripted_server(schema_responder)
    suite, db = _suite(tmp_path, 3), tmp_path / "h.sqlite"
    out = tmp_path / "runs" / "nightly-with-a-rather-long-folder-name-as-teams-write-them"
    assert _run(["--reference", f"ref={srv.base_url}", "--endpoint", f"cand={srv.base_url}", "--suite", str(suite),
                 "--out", str(out), "--db", str(db), "-q"]).exit_code == 0
    run_id = RunManifest.load(out).run_id
    res = _run(["--resume", str(out), "-q"])
    assert res.exit_code == 0, res.stderr
    assert RunManifest.load(out).run_id == run_id and _indexed_runs(db) == [(run_id, str(out.resolve()))]
    copy = tmp_path / "copy"
    copy.mkdir()
    summary = json.loads((out / "summary.json").read_text())
    summary["started_at"] = "2020-01-01T00:00:00+00:00"
    (copy / "summary.json").write_text(json.dumps(summary))
    [warning] = index_history(copy, db)
    assert len(warning) > 200 and warning.endswith("index only one of them.") and "(...)" not in warning, warning


def test_long_messages_are_cut_only_at_a_sentence_end() -> None:
    text = "First sentence explains. " * 30 + "x" * 300
    cut = shorten_at_sentence(text, limit=400)
    assert cut.endswith("explains. (...)") and len(cut) <= 410
    assert shorten_at_sentence("short one.", limit=400) == "short one."


@pytest.mark.slow
@pytest.mark.parametrize("started_with", [["--no-history"], ["--db", "{db}"]])
def test_resume_keeps_the_history_settings_it_started_with(tmp_path, scripted_server, monkeypatch,
                                                           started_with: list[str]) -> None:
    """--resume without flags: a --no-history run stays out of history; a --db run goes into that database, not
    the default one ($VERIFIER_DB here)."""
    default_db, own_db = tmp_path / "default.sqlite", tmp_path / "own.sqlite"
    monkeypatch.setenv("VERIFIER_DB", str(default_db))
    srv = scripted_server(schema_responder)
    out = tmp_path / "run"
    flags = [f.format(db=own_db) for f in started_with]
    assert _run(["--reference", f"ref={srv.base_url}", "--endpoint", f"cand={srv.base_url}", "--suite",
                 str(_suite(tmp_path, 6)), "--out", str(out), "-q", *flags]).exit_code == 0
    # interrupted after a third of the exchanges: the resume has something to send
    records = (out / "records.jsonl").read_text().splitlines(keepends=True)
    assert len(records) == 6 * 3  # 6 cases each, and the reference answers each case of a small suite twice
    (out / "records.jsonl").write_text("".join(records[:6]))
    if own_db.exists():
        own_db.unlink()
    sent = srv.request_count
    res = _run(["--resume", str(out), "-q"])
    assert res.exit_code == 0, res.stderr
    assert srv.request_count - sent == 12 + 2  # the missing two thirds, plus two preflights
    assert not default_db.exists()  # never the default database
    publish = RunManifest.load(out).settings["publish"]
    if started_with == ["--no-history"]:
        assert publish["history"] is False and not own_db.exists()
    else:
        assert publish == {"history": True, "db": str(own_db), "db_redacted": False}
        assert [r for r, _ in _indexed_runs(own_db)] == [RunManifest.load(out).run_id]
        # verifier report without --db draws the history of the run's own database
        (out / "report.html").unlink()
        assert CliRunner().invoke(app, ["report", str(out)]).exit_code == 0
        assert '<section id="history">' in (out / "report.html").read_text()


def test_resume_of_a_run_whose_db_url_held_a_password_asks_for_db(tmp_path, scripted_server) -> None:
    srv = scripted_server(schema_responder)
    out = tmp_path / "run"
    url = "postgresql://user:s3cret-PW@127.0.0.1:9/hist"  # nothing listens: indexing fails, the run stands
    res = _run(["--reference", f"ref={srv.base_url}", "--endpoint", f"cand={srv.base_url}", "--suite",
                str(_suite(tmp_path, 2)), "--out", str(out), "-q", "--db", url])
    assert res.exit_code == 0 and "not indexed" in res.stderr
    assert "s3cret-PW" not in (out / "manifest.json").read_text() + (out / "summary.json").read_text()
    res = _run(["--resume", str(out), "-q"])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        "error: --resume: the run indexes into postgresql://***@127.0.0.1:9/hist, whose credentials are not "
        "stored; pass the same --db again (or --no-history)"]
    assert _run(["--resume", str(out), "-q", "--no-history"]).exit_code == 0


def test_endpoint_without_reference_is_refused_in_one_line(tmp_path, scripted_server) -> None:
    srv = scripted_server(schema_responder)
    res = _run(["--endpoint", f"cand={srv.base_url}", "--suite", str(_suite(tmp_path, 2)),
                "--out", str(tmp_path / "run"), "--no-history", "-q"])
    assert res.exit_code == 2 and srv.request_count == 0
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("error: --endpoint needs --reference") and "--reference builtin:tiny" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_progress_lines_in_a_log_when_output_is_not_a_terminal(tmp_path, scripted_server) -> None:
    """stdout and stderr piped (CI, tee): a plain progress line every interval (0.5 s here, 10 s by default)."""
    def slow(body, ctx):
        r = schema_responder(body, ctx)
        r.delay_s = 0.15
        return r

    srv = scripted_server(slow)
    cmd = [sys.executable, "-m", "verifier.cli", "run", "--reference", f"ref={srv.base_url}", "--endpoint",
           f"cand={srv.base_url}", "--suite", str(_suite(tmp_path, 12)), "--out", str(tmp_path / "run"),
           "--no-history", "--concurrency", "1"]
    env = {**os.environ, "VERIFIER_PROGRESS_INTERVAL_S": "0.5"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("progress ")]
    assert len(lines) >= 3, proc.stderr  # 36 exchanges x 0.15 s >= 5.4 s
    # 12 cases each, and the reference answers every case of a suite under 50 cases twice (reference_repeats)
    total = len((tmp_path / "run" / "records.jsonl").read_text().splitlines())
    assert total == 12 * 3
    assert all(" exchanges, " in ln and f"/{total} exchanges" in ln for ln in lines), lines
    assert "\x1b[" not in proc.stderr  # plain text: no bar redrawn with escape codes
    quiet = subprocess.run([*cmd[:-5], "--out", str(tmp_path / "quiet"), "--no-history", "-q", "--concurrency", "1"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert quiet.returncode == 0 and "progress " not in quiet.stderr
