"""Wall time of the README's main job: `verifier run` with no flags (embedded default, 4 engine variants).

    python benchmarks/default_run.py --repeats 3

Issue #5 asks for the whole default run in under 10 minutes on 2 cores. Each repeat runs the real CLI in a
fresh temporary folder (history off, so repeats do not see each other) and the median wall time is printed
with the exchange count and error count read from the run's summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one_run() -> tuple[float, int, int]:
    """(wall seconds, exchanges, errors) of one `verifier run` into a temporary folder."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "verifier.cli", "run", "--out", str(out), "--no-history"],
                       check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        records = (out / "records.jsonl").read_text().splitlines()
        errors = sum(1 for line in records if json.loads(line).get("error_class"))
        return wall, len(records), errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    walls = []
    for i in range(args.repeats):
        wall, n, errors = one_run()
        walls.append(wall)
        print(f"run {i + 1}: {wall:.1f} s, {n} exchanges, {errors} errors", flush=True)
    print(f"median {statistics.median(walls):.1f} s over {len(walls)} runs (goal: < 600 s on 2 cores)")


if __name__ == "__main__":
    main()
