"""Wall time of the README's main job, `verifier run` with no flags (embedded default: 4 engine variants x 4 smoke
suites), and where the time went.

    PYTHONPATH=. python benchmarks/default_run.py --repeats 3
    python benchmarks/default_run.py --tree /path/to/old/checkout --tree . --repeats 3    # A/B, interleaved

Issue #43 asks for the whole default run in at most 40 s on an idle 2-core machine. Each repeat runs the real CLI
(`python -m verifier.cli run --out TMP --no-history`) in a fresh temporary folder, with the working directory at
the tree under test, so that tree's code is what runs. With several ``--tree``, repeats are interleaved (A B A B
...), so a machine whose load drifts hurts every tree alike.

Printed per tree, median over the repeats with the spread (min-max) beside it: wall seconds, busy CPU seconds
(on Linux the whole machine's, see ``_children_cpu``), exchanges and exchanges per second, and the breakdown the run
records in ``summary.json`` (``timings``: engine start, preflight, each suite, probes, scoring), plus what the
CLI spends before the runner starts (imports) and after it scored (history index, report, exit). A tree whose
runs record no timings (older code) shows wall and CPU only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunTime:
    """One run of the CLI: wall and CPU seconds, exchanges, errors, and the phases (name -> seconds) it recorded."""

    wall: float
    cpu: float
    exchanges: int
    errors: int
    phases: dict[str, float] = field(default_factory=dict)


def _children_cpu() -> float:
    """CPU seconds of the run and everything it started. On Linux, the whole machine's busy time (/proc/stat: user,
    nice, system, irq, softirq), because the built-in engines are children of the fork server the run starts
    (reference_engine/engine_zygote.py), which outlives the run by a moment and is never waited for, so the run's
    own rusage no longer holds them; on an idle machine that is the run's. Elsewhere: the waited-for children."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:8]
        user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields)
        return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime


def phases_from(summary: dict, launched: float, ended: float) -> dict[str, float]:
    """The breakdown, in the order a run goes through it, from summary.json's ``timings`` (empty without)."""
    t = summary.get("timings")
    if not t:
        return {}
    out = {"startup (imports, inputs)": t["started_unix"] - launched, "engine start": t["engines_s"],
           "preflight": t["preflight_s"]}
    for s in t["suites"]:
        out[f"suite {s['suite']}"] = s["seconds"]
    out["probes"] = t["probes_s"]
    out["scoring"] = t["scoring_s"]
    accounted = t["engines_s"] + t["preflight_s"] + sum(s["seconds"] for s in t["suites"]) + t["probes_s"] \
        + t["scoring_s"]
    out["other in the runner"] = t["finished_unix"] - t["started_unix"] - accounted
    out["report, history, exit"] = ended - t["finished_unix"]
    return out


def one_run(tree: Path) -> RunTime:
    """Run the default `verifier run` from ``tree`` into a temporary folder; wall, CPU, counts and phases."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        env = {**os.environ, "PYTHONPATH": str(tree)}
        cpu0, launched, t0 = _children_cpu(), time.time(), time.perf_counter()
        subprocess.run([sys.executable, "-m", "verifier.cli", "run", "--out", str(out), "--no-history"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tree, env=env)
        wall, ended, cpu = time.perf_counter() - t0, time.time(), _children_cpu() - cpu0
        records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
        errors = sum(1 for r in records if r.get("error_class"))
        summary = json.loads((out / "summary.json").read_text())
        return RunTime(wall, cpu, len(records), errors, phases_from(summary, launched, ended))


def _stat(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f} s  ({min(values):.1f}-{max(values):.1f})"


def report(tree: Path, runs: list[RunTime]) -> None:
    walls = [r.wall for r in runs]
    print(f"\n{tree}: {len(runs)} runs, {runs[0].exchanges} exchanges, {max(r.errors for r in runs)} errors at most")
    print(f"  {'wall':<34}{_stat(walls)}   goal: <= 40 s idle on 2 cores")
    print(f"  {'cpu (busy, whole machine)':<34}{_stat([r.cpu for r in runs])}")
    rates = [r.exchanges / r.wall for r in runs]
    print(f"  {'exchanges per second':<34}{statistics.median(rates):7.1f}    ({min(rates):.1f}-{max(rates):.1f})")
    names = [n for n in runs[0].phases if all(n in r.phases for r in runs)]
    if not names:
        print("  (no timings in summary.json: this tree predates them)")
    for n in names:
        print(f"  {n:<34}{_stat([r.phases[n] for r in runs])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tree", type=Path, action="append",
                    help="checkout to run (repeatable: runs interleave); default: this checkout")
    args = ap.parse_args()
    trees = [t.resolve() for t in (args.tree or [Path(__file__).resolve().parents[1]])]
    runs: dict[Path, list[RunTime]] = {t: [] for t in trees}
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    for i in range(args.repeats):
        for tree in trees:
            r = one_run(tree)
            runs[tree].append(r)
            print(f"run {i + 1} {tree.name}: {r.wall:.1f} s wall, {r.cpu:.1f} s cpu, {r.exchanges} exchanges, "
                  f"{r.errors} errors", flush=True)
    for tree in trees:
        report(tree, runs[tree])
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
