"""The progress total of a logprob run on the built-in engine counts the exact paths its probe finds.

Why: ``planned_exchanges`` is known before any probe, and the built-in engine adds full-distribution requests
(prefill and decode, greedy and each sampled continuation); the log once read "progress logprob-core: 108/62".
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

LINE = re.compile(r"^progress [^:]+: (\d+)/(\d+) exchanges, ")


@pytest.mark.slow
def test_progress_total_is_what_a_builtin_logprob_run_records(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "verifier.cli", "run", "--reference", "builtin:tiny", "--endpoint",
           "cand=builtin:tiny", "--suite", "logprob-core", "--limit", "2", "--out", str(out), "--no-history"]
    env = {**os.environ, "VERIFIER_PROGRESS_INTERVAL_S": "0.2"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    recorded = len((out / "records.jsonl").read_text().splitlines())
    seen = [(int(m[1]), int(m[2])) for ln in proc.stderr.splitlines() if (m := LINE.match(ln))]
    assert seen, proc.stderr
    assert all(done <= total for done, total in seen), seen
    assert seen[-1][1] == recorded and f"exchanges in this run: {recorded}," in proc.stderr + proc.stdout
    # the exact paths are there to be counted: prefill and decode, greedy and sampled, on both endpoints
    assert '"variant":"decode_exact"' in (out / "records.jsonl").read_text().replace(" ", "")
