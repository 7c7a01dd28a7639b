"""The reference engine of two source trees, side by side on `engine_decode.py`'s workload: speed and greedy tokens.

    python benchmarks/engine_ab.py --tree /path/to/old/checkout --tree . [--concurrency 1 8 32] [--repeats 5]
                                   [--kv fp32] [--weights fp32] [--clock cpu] [--stagger]

Why a separate script: `engine_decode.py` measures one tree's engine against Hugging Face; to steer a change of the
engine the question is "new engine vs old engine", on the same machine, in the same minutes. Each tree's engine runs
in its own worker process (this file with ``--worker``, the tree first on ``PYTHONPATH``, so that tree's code is what
runs) and the parent alternates them round by round (A B, then B A, ...), so load that drifts on a shared machine hurts
both alike. The first round warms each side up and is discarded; each side's figure is the median of ``--repeats``
rounds with half the spread beside it, and the ratio (second tree / first) is the median of per-round ratios. The
greedy tokens of every request are compared between the trees (a speed-up must not change what the engine computes).
``--clock cpu`` (default) counts each worker's own CPU time, steadier than wall time on a shared machine.
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
from collections.abc import Callable
from pathlib import Path

NOISY = 0.10


def _worker(kv: str, weights: str, threads: int, clock_name: str) -> None:
    """Serve ``{"conc": n, "new": n, "reps": n}`` lines on stdin with ``{"tok_s": x, "tokens": [[...]]}`` lines."""
    import torch

    torch.set_num_threads(threads)
    from reference_engine.config import EngineConfig
    from reference_engine.engine import Engine, TokenEvent
    from reference_engine.sequence import SamplingParams
    from reference_engine.tiny_checkpoint import build_checkpoint

    clock = time.process_time if clock_name == "cpu" else time.perf_counter

    def sink_for(into: list[int]) -> Callable[[object], None]:
        def sink(ev: object) -> None:
            if isinstance(ev, TokenEvent):
                into.append(ev.choice.token_id)
        return sink

    with tempfile.TemporaryDirectory() as tmp:
        # the model and prompts of benchmarks/engine_decode.py
        path = build_checkpoint(Path(tmp) / "bench-llama", "llama", hidden=256, layers=4, heads=8, kv_heads=4,
                                intermediate=768, vocab=512, max_pos=1024)
        eng = Engine(EngineConfig(model_path=path, weights=weights, kv_dtype=kv, threads=threads,
                                  kv_budget_bytes=256 << 20))
        vocab = eng.model_config.vocab_size
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            cmd = json.loads(line)
            g = torch.Generator().manual_seed(0)
            reqs = [torch.randint(10, vocab - 10, (32,), generator=g).tolist() for _ in range(cmd["conc"])]
            # staggered: request i stops after new * (i % 4 + 1) / 4 tokens, so the batch changes every few steps
            new = [cmd["new"] * (i % 4 + 1) // 4 if cmd["stagger"] else cmd["new"] for i in range(len(reqs))]
            got: list[list[int]] = []
            t = clock()
            for _ in range(cmd["reps"]):
                got = [[] for _ in reqs]
                for i, p in enumerate(reqs):
                    eng.submit(f"r{i}-{time.monotonic_ns()}", p,
                               SamplingParams(temperature=0, max_tokens=new[i], ignore_eos=True),
                               sink_for(got[i]))
                eng.run_until_idle()
            dt = clock() - t
            print(json.dumps({"tok_s": cmd["reps"] * sum(new) / dt, "tokens": got}), flush=True)


class Side:
    """One tree's worker process."""

    def __init__(self, tree: Path, args: argparse.Namespace) -> None:
        env = dict(os.environ, PYTHONPATH=str(tree))
        self.tree = tree
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", "--kv", args.kv, "--weights", args.weights,
             "--threads", str(args.threads), "--clock", args.clock],
            cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._read()

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.tree}: the worker exited (see its error above)")
        return json.loads(line)

    def run(self, conc: int, new: int, reps: int, stagger: bool) -> tuple[float, list[list[int]]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"conc": conc, "new": new, "reps": reps, "stagger": stagger}) + "\n")
        self.proc.stdin.flush()
        r = self._read()
        return r["tok_s"], r["tokens"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs)


def cell(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} ±{100 * spread(xs) / 2:.0f}%"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, action="append", default=[], help="a source tree (give exactly two)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--min-round-s", type=float, default=1.0)
    ap.add_argument("--kv", default="fp32", help="KV dtype (fp32, bf16, fp8; default fp32 as engine_decode.py)")
    ap.add_argument("--weights", default="fp32", help="weight format (default fp32 as engine_decode.py)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    ap.add_argument("--stagger", action="store_true",
                    help="request i stops after new * (i %% 4 + 1) / 4 tokens (the batch changes as requests finish)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args.kv, args.weights, args.threads, args.clock)
        return
    if len(args.tree) != 2:
        ap.error("give exactly two --tree")
    if args.repeats < 5:
        ap.error("--repeats must be at least 5")
    sides = [Side(t.resolve(), args) for t in args.tree]
    print(f"A = {sides[0].tree}, B = {sides[1].tree}; kv {args.kv}, weights {args.weights}, threads {args.threads}, "
          f"{args.clock} clock{', staggered lengths' if args.stagger else ''}, median of {args.repeats} rounds "
          "(A B / B A alternating) ± half the spread")
    print(f"{'conc':>5} {'reps':>4} {'A tok/s':>14} {'B tok/s':>14} {'B / A':>14}  greedy A = B")
    try:
        for c in args.concurrency:
            rates: list[list[float]] = [[], []]
            toks: list[list[list[int]]] = [[], []]
            reps = 1
            same = True
            for round_ in range(args.repeats + 1):   # round 0 warms both up and sizes the others (>= --min-round-s)
                order = (0, 1) if round_ % 2 == 0 else (1, 0)
                warm: list[float] = []
                for i in order:
                    r, toks[i] = sides[i].run(c, args.new, reps, args.stagger)
                    (rates[i] if round_ else warm).append(r)
                same &= toks[0] == toks[1]
                if not round_:
                    reps = max(1, round(args.min_round_s * min(warm) / (args.new * c)))
            rs = [b / a for a, b in zip(*rates)]
            n_same = sum(a == b for a, b in zip(*toks))
            print(f"{c:>5} {reps:>4} {cell(rates[0]):>14} {cell(rates[1]):>14} "
                  f"{statistics.median(rs):>7.2f} ±{100 * spread(rs) / 2:.0f}%{' noisy' if spread(rs) > NOISY else ''}"
                  f"  {n_same}/{c}{'' if same else ' (differed in some round)'}", flush=True)
    finally:
        for s in sides:
            s.close()


if __name__ == "__main__":
    main()
