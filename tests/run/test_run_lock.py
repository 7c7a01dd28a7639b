"""One writer per run folder, with real ``verifier run`` processes against a scripted loopback server.

Issue 32 §5: two ``verifier run --resume DIR`` at once both ran and wrote 336 duplicate keys. Here the second
writer must exit 2 with one line naming the first (pid, host, start time) and send nothing; a ``kill -9`` must
never leave a lock behind; and a folder whose records.jsonl already holds duplicated lines (older versions)
must score exactly like the same folder without them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.records import ExchangeRecord
from verifier.run.store import LOCK_NAME, RunManifest
from verifier.run.summary import RunSummary
from verifier.testing import schema_responder

CORE = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"


def make_suite(tmp_path: Path, n: int) -> Path:
    p = tmp_path / "mini.jsonl"
    p.write_text("\n".join(CORE.read_text().splitlines()[:n]) + "\n")
    return p


def slow_responder(delay_s: float, gate: threading.Event | None = None):
    """schema_responder, late by ``delay_s``; while ``gate`` is clear, every answer waits for it (the server
    stalls), so a test can keep a run alive for exactly as long as it needs it."""
    def respond(body, ctx):
        if gate is not None:
            gate.wait(timeout=60)
        r = schema_responder(body, ctx)
        r.delay_s = delay_s
        return r
    return respond


def cli_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "verifier.cli", "run", *args, "--no-history", "-q"]


def wait_for(cond, proc: subprocess.Popen | None, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"process exited before {what}: {proc.stderr.read().decode()[-800:]}")
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def lock_holder(run_dir: Path) -> dict | None:
    try:
        raw = (run_dir / LOCK_NAME).read_text()
        return json.loads(raw) if raw.strip() else None
    except (OSError, ValueError):
        return None


def line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.slow
def test_two_resumes_at_once_second_exits_2_naming_the_holder_and_sends_nothing(tmp_path, scripted_server):
    gate = threading.Event()
    gate.set()
    srv = scripted_server(slow_responder(0.1, gate))
    n = 30
    suite, out = make_suite(tmp_path, n), tmp_path / "run"
    records = out / "records.jsonl"
    base = ["--reference", f"ref={srv.base_url}", "--endpoint", f"cand={srv.base_url}", "--suite", str(suite),
            "--concurrency", "2"]
    # a run killed with SIGKILL midway: the folder the user had, and a lock whose holder died
    first = subprocess.Popen(cli_cmd(*base, "--out", str(out)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for(lambda: line_count(records) >= 6, first, "the first records")
    assert (lock_holder(out) or {}).get("pid") == first.pid
    first.send_signal(signal.SIGKILL)
    first.wait()
    before = line_count(records)
    assert 6 <= before < 3 * n  # 2 endpoints and the reference's second answers (all n: fewer than 50)

    # two --resume processes at once: A takes the folder (a kill -9 left no stale lock), B is turned away
    sent_before = srv.request_count
    gate.clear()  # A's first request stalls until B is done: A is certainly mid-run while B tries
    try:
        a = subprocess.Popen(cli_cmd("--resume", str(out)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(lambda: (lock_holder(out) or {}).get("pid") == a.pid, a, "the resume to take the lock")
        b = subprocess.run(cli_cmd("--resume", str(out)), capture_output=True, text=True, timeout=120, check=False)
        assert a.poll() is None, "A should still be running while B is refused"
    finally:
        gate.set()
    assert b.returncode == 2, b.stderr
    err = b.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in b.stderr, b.stderr
    assert err[0].startswith(f"error: {out}: another verifier run is writing this folder")
    assert f"pid {a.pid} on {socket.gethostname()}, started 20" in err[0]
    assert a.wait(timeout=180) == 0, a.stderr.read().decode()[-800:]

    # every exchange exactly once; only A sent anything: what was missing plus its two preflight calls
    recs = [ExchangeRecord.model_validate_json(x) for x in records.read_text().splitlines()]
    keys = Counter(r.key() for r in recs)
    assert len(keys) == 3 * n and max(keys.values()) == 1
    assert srv.request_count - sent_before == 3 * n - before + 2
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    for r in summary.results:
        assert r.metrics["error_rate"].n == n, (r.endpoint, r.metrics["error_rate"])
    m = RunManifest.load(out)
    assert m.status == "completed" and len(m.resumed_at) == 1  # B never touched the manifest
    assert lock_holder(out) is None  # released on exit: the note is emptied


def hold_lock_in_another_process(run_dir: Path) -> subprocess.Popen:
    """A process that takes the folder's lock and sleeps: a writer in the middle of its run, as far as the lock goes."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from verifier.run.store import RunFolderLock; RunFolderLock(sys.argv[1]).acquire(); "
        "print('held', flush=True); time.sleep(60)"), str(run_dir)], stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert holder.stdout.readline().strip() == b"held"
    return holder


@pytest.mark.slow
def test_new_run_into_a_locked_out_folder_exits_2_and_a_dead_holder_frees_it(tmp_path, scripted_server):
    """``--out DIR`` where a live writer holds DIR's lock (a run that has not written its manifest yet): exit 2,
    one line naming it. Once that writer is killed with -9, the folder (holding only the lock file) is usable."""
    srv = scripted_server(schema_responder)
    suite, out = make_suite(tmp_path, 2), tmp_path / "run"
    out.mkdir()
    args = cli_cmd("--reference", f"ref={srv.base_url}", "--suite", str(suite), "--out", str(out))
    holder = hold_lock_in_another_process(out)
    try:
        b = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert b.returncode == 2 and len(b.stderr.strip().splitlines()) == 1 and "Traceback" not in b.stderr, b.stderr
    assert b.stderr.startswith(f"error: {out}: another verifier run is writing this folder (pid {holder.pid} on ")
    assert srv.request_count == 0
    assert [p.name for p in out.iterdir()] == [LOCK_NAME]
    c = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert c.returncode == 0, c.stderr
    assert RunManifest.load(out).status == "completed"


def _run_ok(args: list[str]) -> None:
    res = CliRunner().invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.stderr


@pytest.mark.slow
def test_duplicated_records_score_like_the_deduplicated_folder(tmp_path, scripted_server):
    """records.jsonl holding each of one endpoint's lines twice (as two writers left it) scores the same."""
    srv = scripted_server(schema_responder)
    suite, clean = make_suite(tmp_path, 8), tmp_path / "clean"
    _run_ok(["run", "--reference", f"ref={srv.base_url}", "--endpoint", f"cand={srv.base_url}", "--suite", str(suite),
             "--out", str(clean), "--no-history", "-q"])
    dup = tmp_path / "dup"
    shutil.copytree(clean, dup)
    lines = (dup / "records.jsonl").read_text().splitlines()
    # the second copy of each cand line is a *failed* exchange: counted, it would move n and the error rate
    extra = []
    for line in lines:
        d = json.loads(line)
        if d["endpoint"] == "cand":
            d.update(status=500, error_class="server_error", error_message="scripted", tool_calls=[], content=None,
                     response=None)
            extra.append(json.dumps(d, separators=(",", ":")))  # as model_dump_json writes them
    assert len(extra) == 8
    with open(dup / "records.jsonl", "a") as fh:
        fh.write("\n".join(extra) + "\n")

    # re-score both folders the same way: --resume of a finished run sends nothing and scores records.jsonl
    _run_ok(["run", "--resume", str(clean), "--no-history", "-q"])
    res = CliRunner().invoke(app, ["run", "--resume", str(dup), "--no-history", "-q"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    a = RunSummary.model_validate_json((clean / "summary.json").read_text())
    b = RunSummary.model_validate_json((dup / "summary.json").read_text())
    assert len(a.results) == len(b.results) == 2
    for ra, rb in zip(a.results, b.results):
        assert (ra.endpoint, ra.suite) == (rb.endpoint, rb.suite)
        assert ra.metrics == rb.metrics and ra.counts == rb.counts and ra.comparisons == rb.comparisons
    assert a.result("cand", "mini").metrics["error_rate"].n == 8
    assert "warning: records.jsonl: 8 duplicate record line(s) ignored in scoring" in res.stderr
    assert b.result("cand", "mini").notes[-1].startswith("8 duplicate record line(s) in records.jsonl ignored")
    assert not any("duplicate" in note for note in b.result("ref", "mini").notes)
    assert not any("duplicate" in note for r in a.results for note in r.notes)


def test_lock_released_by_sigkill_and_held_against_this_process(tmp_path):
    """The lock is the kernel's: a holder killed with -9 frees it at once; a live holder names itself."""
    from verifier.run.store import RunFolderBusy, RunFolderLock

    holder = hold_lock_in_another_process(tmp_path)
    try:
        with pytest.raises(RunFolderBusy, match=rf"pid {holder.pid} on "):
            RunFolderLock(tmp_path).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert lock_holder(tmp_path)["pid"] == holder.pid  # the dead holder's note is still there...
    with RunFolderLock(tmp_path):  # ...but the lock is free
        assert lock_holder(tmp_path)["pid"] == os.getpid()
        with pytest.raises(RunFolderBusy, match=rf"pid {os.getpid()} on "):
            RunFolderLock(tmp_path).acquire()  # flock is per open file: a second open in one process is refused too
    assert lock_holder(tmp_path) is None
