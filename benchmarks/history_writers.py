"""Concurrent writers into one history: N processes each indexing M runs at the same moment, SQLite and PostgreSQL.

    python benchmarks/history_writers.py --writers 4 --runs 10 --repeats 3

Issue #35 §1: nightly jobs finishing together must lose and double nothing. Each repeat starts a fresh SQLite
file and a fresh database on a temporary PostgreSQL server (``verifier.testing.pg_cluster``), launches the
writers (``tests/history/index_worker.py``: import, wait at a barrier, index its runs through ``index_run``),
then counts what is stored: runs present, metric rows per run, duplicate keys. Printed per backend: the
median wall time from the barrier to the last writer's end, index calls per second, and the counts (the
counts must be exact in every repeat; the script exits 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.report.fixtures import make_summary, write_run  # noqa: E402  (synthetic but complete run summaries)
from verifier.history import load_frame  # noqa: E402
from verifier.history.indexing import metric_rows  # noqa: E402
from verifier.testing.pg_cluster import TemporaryPostgres  # noqa: E402


def one_round(db: str, tmp: Path, writers: int, runs: int) -> tuple[float, dict[str, int]]:
    base, _ = make_summary(n=60)
    per_run = len(metric_rows(base))
    jobs: dict[str, list[Path]] = {}
    for w in range(writers):
        folders = []
        for i in range(runs):
            s = base.model_copy(update={"run_id": f"w{w}-r{i:03d}",
                                        "started_at": f"2026-03-01T02:{w:02d}:{i % 60:02d}Z"})
            folders.append(write_run(tmp / "runs" / s.run_id, s))
        jobs[f"w{w}"] = folders
    go = tmp / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, str(REPO / "tests/history/index_worker.py"), db, str(go),
                               str(tmp / f"{name}.times"), *map(str,
                                                                folders)], env=env, stderr=subprocess.PIPE, text=True)
             for name, folders in jobs.items()]
    deadline = time.monotonic() + 120
    while not all((tmp / f"{name}.times.ready").exists() for name in jobs):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise SystemExit("writers did not start: " + " ".join((p.stderr.read() if p.stderr else "") for p in procs))
        time.sleep(0.02)
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"writer failed: {err[-2000:]}")
    times = [json.loads((tmp / f"{name}.times").read_text()) for name in jobs]
    wall = max(t["end"] for t in times) - min(t["start"] for t in times)
    frame = load_frame(db, basis=None)
    counts = frame.groupby("run_id").size()
    stats = {
        "runs_expected": writers * runs,
        "runs_stored": int(counts.size),
        "runs_with_wrong_row_count": int((counts != per_run).sum()),
        "duplicate_keys": int(frame.duplicated(["run_id", "endpoint", "suite", "basis", "metric"]).sum()),
        "rows_stored": len(frame),
    }
    return wall, stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--runs", type=int, default=10, help="runs indexed by each writer")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    ok = True
    with TemporaryPostgres() as pg:
        pg.create_role("bench", "bench-pw")
        for backend in ("sqlite", "postgresql"):
            walls, last = [], {}
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory() as d:
                    tmp = Path(d)
                    db = str(tmp / "h.sqlite") if backend == "sqlite" else pg.url(pg.create_database("bench"), "bench",
                                                                                   "bench-pw")
                    wall, last = one_round(db, tmp, args.writers, args.runs)
                    walls.append(wall)
                    ok &= (last["runs_stored"] == last["runs_expected"] and last["runs_with_wrong_row_count"] == 0
                           and last["duplicate_keys"] == 0)
            med = statistics.median(walls)
            calls = args.writers * args.runs
            print(f"{backend:10s} {args.writers} writers x {args.runs} runs: median {med:.2f} s "
                  f"({calls / med:.1f} index calls/s; runs {[round(w, 2) for w in walls]}) | last repeat: {last}")
    print("all counts exact" if ok else "COUNTS WRONG")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
