"""Train several recipes side by side on one GPU, each at the step count a CPU run reaches.

    python -m training.sweep --work /tmp/sweep --bundle-to OUT --time-limit-min 7 \\
        control="--steps 20023" lr8e-3="--steps 20023 --lr 8e-3" seed11="--steps 20023 --init-seed 11"

Why: the shipped recipe trains on 2 CPU cores within 45 minutes, and at this size the number of steps
decides the result (MODEL_CARD.md), so a recipe can only be judged at the step count that budget reaches.
A GPU replays such a count in minutes, several runs at once. Each run's checkpoint is then scored with
``training.evaluate --model DIR`` on any machine, against a control run of the shipped recipe made the same
way: GPU arithmetic differs from the CPU's, so compare runs of one sweep with each other.

The corpus is prepared once (``training.train --prepared``); every run is ``training.train`` with its own
arguments, its own process and log. A run that the time limit cuts short completes its schedule early,
as on a slow CPU, and its log says at which step. ``--bundle-to`` packs each run (checkpoint and log) into
``NAME.tar.gz``, the form in which a lent machine hands files back.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from training.train import PREPARED_RECORD

#: ``training`` is not an installed package: its modules run from the repository root
REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Run:
    name: str
    args: list[str]
    log: Path
    out: Path
    process: subprocess.Popen | None = None


def parse_run(spec: str, work: Path) -> Run:
    """``NAME=ARGS`` -> a run whose checkpoint goes to ``work/NAME``."""
    name, sep, rest = spec.partition("=")
    if not sep or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise SystemExit(f"run {spec!r}: expected NAME=\"ARGS\" with NAME in letters, digits, '-', '_', '.'")
    return Run(name, shlex.split(rest), work / f"{name}.log", work / name)


def last_line(log: Path, prefix: str) -> str:
    """The last line of ``log`` starting with ``prefix`` ('' when none)."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith(prefix)] if log.exists() else []
    return lines[-1] if lines else ""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help='NAME="training.train arguments"')
    ap.add_argument("--work", type=Path, required=True, help="checkpoints, logs and the prepared corpus")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--time-limit-min", type=float, default=7.0, help="each run's budget, as in training.train")
    ap.add_argument("--prepared", type=Path, default=None,
                    help="a corpus prepared beforehand (training.train --prepared DIR --prepare-only), e.g. on a "
                         "machine that has the suite's dependencies; default: prepared under --work")
    ap.add_argument("--corpus-args", default="", help="corpus arguments shared by every run (--n-toolcall ...)")
    ap.add_argument("--bundle-to", type=Path, default=None, help="write NAME.tar.gz per run here")
    args = ap.parse_args(argv)

    args.work = args.work.resolve()  # the runs start in the repository root
    args.work.mkdir(parents=True, exist_ok=True)
    runs = [parse_run(spec, args.work) for spec in args.runs]
    prepared = (args.prepared or args.work / "prepared").resolve()
    corpus_args = shlex.split(args.corpus_args)
    if not (prepared / PREPARED_RECORD).exists():
        t0 = time.time()
        subprocess.run([sys.executable, "-m", "training.train", "--prepared", str(prepared), "--prepare-only",
                        *corpus_args], check=True, cwd=REPO_ROOT)
        print(f"corpus prepared in {time.time() - t0:.0f}s", flush=True)

    started: list[tuple[Run, subprocess.Popen]] = []
    for run in runs:
        cmd = [sys.executable, "-m", "training.train", "--prepared", str(prepared), "--device", args.device,
               "--threads", "1", "--time-limit-min", str(args.time_limit_min), "--out", str(run.out),
               *corpus_args, *run.args]
        with run.log.open("w") as log:
            run.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
            started.append((run, run.process))
    # each run ends itself within its time budget; the grace covers export and a process's start
    deadline = time.time() + args.time_limit_min * 60 + 120
    while any(process.poll() is None for _, process in started) and time.time() < deadline:
        time.sleep(5)
    for run, process in started:
        if process.poll() is None:
            process.kill()
            process.wait()
        status = "ok" if process.returncode == 0 else f"exit {process.returncode}"
        print(f"{run.name}: {status}; {last_line(run.log, 'step ')}; {last_line(run.log, 'time budget')}",
              flush=True)
        if process.returncode != 0:
            print(run.log.read_text(errors="replace")[-2000:], flush=True)
        if args.bundle_to:
            args.bundle_to.mkdir(parents=True, exist_ok=True)
            with tarfile.open(args.bundle_to / f"{run.name}.tar.gz", "w:gz") as tar:
                tar.add(run.log, arcname=f"{run.name}/train.log")
                if run.out.exists():
                    tar.add(run.out, arcname=f"{run.name}/model")


if __name__ == "__main__":
    main()
