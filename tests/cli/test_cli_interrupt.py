"""Ctrl-C or ``kill -9`` of a real ``verifier run`` process leaves no process behind (the run forks a chart
worker before it measures): Ctrl-C gives one line on stderr and exit 130, and the terminal sends it to the whole
process group; ``kill -9`` reaches the run alone, and its worker must die with it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from verifier.testing.replies import Reply

pytestmark = pytest.mark.slow  # real processes (PostgreSQL, a killed run) take seconds: the quick subset skips them

CORE = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"


def _group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``, read from /proc (no ``ps``: a fresh machine may lack procps)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except (OSError, IndexError):
            continue  # the process ended while we looked
        if int(fields[2]) == pgid and fields[0] != "Z":  # a zombie has exited; its parent just has not reaped it
            members.append(int(stat.parent.name))
    return members


@contextlib.contextmanager
def _sigint_not_ignored() -> Iterator[None]:
    """Let the run started inside this block receive SIGINT, as a terminal's foreground job does. Why: a job that a
    non-interactive shell starts in the background (``nohup pytest ... &``, a CI step's ``cmd &``) inherits SIGINT
    ignored, a child inherits that in turn, and Python leaves an ignored SIGINT ignored: the run would never see the
    Ctrl-C and would finish with exit 0 (this test's failures under such a harness). Only the disposition the child
    inherits changes here, the pytest process's own is restored at once."""
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_slow_run(tmp_path: Path, scripted_server) -> tuple[subprocess.Popen, Path]:
    """A run in its own process group, returned once it is measuring (records on disk, chart worker forked)."""
    srv = scripted_server(lambda body, ctx: Reply(content="slow", delay_s=0.5))
    suite = tmp_path / "s.jsonl"
    suite.write_text("\n".join(CORE.read_text().splitlines()[:200]) + "\n")
    out = tmp_path / "run"
    with _sigint_not_ignored():
        p = subprocess.Popen([sys.executable, "-m", "verifier.cli", "run", "--reference", f"ref={srv.base_url}",
                              "--suite", str(suite), "--out", str(out), "--concurrency", "4", "--no-history", "-q"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    records = out / "records.jsonl"
    while not (records.exists() and records.stat().st_size > 0):
        if p.poll() is not None or time.monotonic() > deadline:
            os.killpg(p.pid, signal.SIGKILL)
            raise AssertionError(f"the run did not start measuring: {p.communicate()[1]}")
        time.sleep(0.1)
    assert len(_group_members(p.pid)) == 2  # the run and its chart worker
    return p, out


def test_ctrl_c_stops_the_run_and_its_chart_worker(tmp_path: Path, scripted_server) -> None:
    p, out = _start_slow_run(tmp_path, scripted_server)
    records = out / "records.jsonl"
    try:
        os.killpg(p.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    assert err.strip().splitlines() == [
        f"interrupted; records so far are on disk. Continue with: verifier run --resume {out}"], err
    assert records.read_text().count("\n") >= 1
    assert _group_members(p.pid) == []


def test_kill_9_of_the_run_takes_its_chart_worker_with_it(tmp_path: Path, scripted_server) -> None:
    p, _ = _start_slow_run(tmp_path, scripted_server)
    try:
        p.kill()  # SIGKILL to the run only: it cannot clean up
        p.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _group_members(p.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _group_members(p.pid) == []  # no orphaned worker waiting forever for charts
    finally:
        if _group_members(p.pid):
            os.killpg(p.pid, signal.SIGKILL)
