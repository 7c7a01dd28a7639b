"""A separate process that indexes run folders into one history database (the concurrent-writer test's worker).

Usage: ``python tests/history/index_worker.py DB GO_FILE TIMES_FILE RUN_DIR...``. Once imported it writes
TIMES_FILE + ".ready" and waits (at most 60 s) until GO_FILE exists, so that two workers start writing at the
same moment, indexes every run folder through the
public ``index_run`` (each call its own engine and transaction, as two ``verifier run`` jobs would), and writes
the start and end time of its writing to TIMES_FILE so the test can check that the two writers overlapped.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    db, go, times_file, *run_dirs = argv
    from verifier.history import index_run  # imported before the barrier: both start writing at once

    Path(times_file + ".ready").touch()
    deadline = time.monotonic() + 60
    while not Path(go).exists():
        if time.monotonic() > deadline:
            print("index_worker: no go signal within 60 s", file=sys.stderr)
            return 2
        time.sleep(0.005)
    start = time.time()
    written = {run: index_run(Path(run), db) for run in run_dirs}
    Path(times_file).write_text(json.dumps({"start": start, "end": time.time(), "rows": written}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
