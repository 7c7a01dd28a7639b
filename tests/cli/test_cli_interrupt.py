"""Ctrl-C in a real ``verifier run`` process: one line on stderr, exit 130, records kept, and no process left
behind (the run forks a chart worker before it measures; the terminal sends SIGINT to the whole group)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from verifier.testing.replies import Reply

CORE = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"


def _group_members(pgid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "pid=", "-g", str(pgid)], capture_output=True, text=True, check=False).stdout
    return out.split()


def test_ctrl_c_stops_the_run_and_its_chart_worker(tmp_path: Path, scripted_server) -> None:
    srv = scripted_server(lambda body, ctx: Reply(content="slow", delay_s=0.5))
    suite = tmp_path / "s.jsonl"
    suite.write_text("\n".join(CORE.read_text().splitlines()[:200]) + "\n")
    out = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-m", "verifier.cli", "run", "--reference", f"ref={srv.base_url}",
                          "--suite", str(suite), "--out", str(out), "--concurrency", "4", "--no-history", "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        records = out / "records.jsonl"
        while not (records.exists() and records.stat().st_size > 0):  # measuring, chart worker forked
            assert p.poll() is None and time.monotonic() < deadline, p.stderr.read() if p.stderr else ""
            time.sleep(0.1)
        assert len(_group_members(p.pid)) == 2  # the run and its chart worker
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
