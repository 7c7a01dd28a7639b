"""The test suite's wall time and peak memory on a loaded machine (the CI budget: under 20 minutes, under 6 GB).

    python benchmarks/test_suite_load.py [--burners 2] [--interval 0.5] [-- PYTEST ARGS...]

Why a script and not a timed test: a CI machine shares its cores with other jobs, and the suite's training runs, whole
`verifier run`s and engine subprocesses compete for them. The goal is about that case, so this runs the README's test
command (``python -m pytest -q``, or the pytest arguments given after ``--``) beside ``--burners`` processes that each
keep one core busy, and samples the proportional memory (PSS) of the whole process tree (pytest and every process it
starts: engines, training workers, PostgreSQL, Chromium) every ``--interval`` seconds from /proc. It prints the wall
time, the peak of that tree's summed PSS (shared pages split among the processes sharing them: the figure a machine's
memory must hold; summed resident sizes would count torch's libraries once per process), the peak rise of the
machine's memory in use as a cross-check, and pytest's own last line.
Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def burn() -> None:
    """Keep one core busy until killed."""
    x = 0
    while True:
        x = (x * 31 + 7) % 1_000_003


def children_of() -> dict[int, list[int]]:
    """Parent pid -> child pids, for every process visible in /proc."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:                          # the process ended while we looked
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def pss_bytes(pid: int) -> int:
    """Proportional resident memory of one process: its private pages plus its share of pages it shares (torch's
    libraries, mapped by every engine and worker, count once across them, not once per process)."""
    for name, key in (("smaps_rollup", "Pss:"), ("status", "VmRSS:")):   # VmRSS where smaps_rollup is unreadable
        try:
            for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        except OSError:
            continue
    return 0


def tree_pss(root: int) -> int:
    """Summed proportional memory of ``root`` and all its descendants: what the machine holds for the test run."""
    tree = children_of()
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += pss_bytes(pid)
        todo.extend(tree.get(pid, []))
    return total


def used_bytes() -> int:
    """The machine's memory in use (MemTotal - MemAvailable), a cross-check that sees page cache and tmpfs too."""
    info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()}
    return info["MemTotal"] - info["MemAvailable"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--burners", type=int, default=2, help="processes each keeping one core busy (default 2)")
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between memory samples (default 0.5)")
    ap.add_argument("pytest_args", nargs="*", help="arguments for pytest after '--' (default: -q)")
    args = ap.parse_args()
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(args.burners)]
    for b in burners:
        b.start()
    cmd = [sys.executable, "-m", "pytest", *(args.pytest_args or ["-q"])]
    peak = peak_used = 0
    used_before = used_bytes()
    t0 = time.monotonic()
    log = Path(tempfile.mkdtemp()) / "pytest.log"
    try:
        with log.open("w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    cwd=Path(__file__).resolve().parent.parent, env=dict(os.environ))
            while proc.poll() is None:
                peak = max(peak, tree_pss(proc.pid))
                peak_used = max(peak_used, used_bytes() - used_before)
                time.sleep(args.interval)
    finally:
        for b in burners:
            b.kill()
    wall = time.monotonic() - t0
    lines = log.read_text(errors="replace").splitlines()
    last = next((ln for ln in reversed(lines) if ln.strip()), "(no output)")
    print(f"command: {' '.join(cmd[1:])}; {args.burners} core-burning processes beside it; "
          f"{os.cpu_count()} cores")
    print(f"wall {wall / 60:.1f} min ({wall:.0f} s); peak memory of the process tree {peak / 2**30:.2f} GiB (PSS), "
          f"machine's memory in use {peak_used / 2**30:.2f} GiB above the start (sampled every {args.interval:g} s); "
          f"exit {proc.returncode}")
    print(f"pytest: {last} (full output: {log})")
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
