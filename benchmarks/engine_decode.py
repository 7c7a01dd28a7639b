"""Decode throughput of the reference engine vs HF transformers `generate`, same model, CPU.

A Llama-shaped model of ~3.5M parameters is written to a temp folder (random weights). Both sides generate exactly
`--new` tokens per request, greedily, with the same torch thread count. Baselines:
  * hf-sequential: one `generate` call per request, one after another (a server without batching);
  * hf-batched: one `generate` call for all requests at once (static batch, equal prompt lengths, no padding), an
    upper bound for batching without paging.
Ours: all requests submitted at once to the engine (continuous batching, paged KV). Figures are generated tokens per
second of the clock (wall time unless `--clock cpu`; prefill included on both sides).

Why the measurement is shaped this way: one run of each side in turn gave 0.91x then 1.41x at the same concurrency on
the same idle machine, and even interleaved medians spread 7-22 % per side. So the sides are interleaved (engine,
hf-seq, hf-batch, engine, ...), one warm-up round is run and discarded, and each round repeats the workload until the
engine's share of it lasts `--min-round-s` (a 0.3 s round is at the mercy of one scheduler hiccup). Each side's figure
is the median of `--repeats` (>= 5) rounds with half its spread ((max - min) / median) beside it; each ratio is the
median of the per-round ratios (engine vs the other side in the same round, so a slow patch that hits both cancels),
with that ratio's own spread, flagged `noisy` above 10 %. `--clock cpu` measures the process's CPU time instead of
wall time (steadier on a machine shared with other jobs, whose turns on the cores it does not count). The benchmark also
checks that the engine's greedy tokens equal HF's for every request (the speed must not come from computing something
else).

  python benchmarks/engine_decode.py [--concurrency 1 8 32] [--new 64] [--repeats 7] [--min-round-s 1.0]
                                     [--clock wall|cpu] [--threads 1]
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from cpu_args import parse_cpu_args

from reference_engine.config import EngineConfig
from reference_engine.engine import Engine, TokenEvent
from reference_engine.sequence import SamplingParams
from reference_engine.tiny_checkpoint import build_checkpoint

PROMPT_LEN = 32
NOISY = 0.10  # a spread above this is reported as noisy, not as a figure to steer by
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def model_dir(root: Path) -> Path:
    return build_checkpoint(root / "bench-llama", "llama", hidden=256, layers=4, heads=8, kv_heads=4,
                            intermediate=768, vocab=512, max_pos=1024)


def prompts(n: int, vocab: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(10, vocab - 10, (PROMPT_LEN,), generator=g).tolist() for _ in range(n)]


def make_engine(path: Path, **cfg) -> Engine:
    """One engine per benchmark (as a server keeps one), warmed up once (allocator, first-call overheads)."""
    eng = Engine(EngineConfig(model_path=path, weights="fp32", kv_dtype=cfg.pop("kv", "fp32"),
                              threads=torch.get_num_threads(), kv_budget_bytes=256 << 20, **cfg))
    eng.submit("w", [11, 12, 13], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True), lambda ev: None)
    eng.run_until_idle()
    return eng


def run_engine(eng: Engine, reqs: list[list[int]], new: int, outputs: list[list[int]] | None = None,
               reps: int = 1, clock: Callable[[], float] = time.perf_counter) -> float:
    """Tokens per second for all requests submitted at once, ``reps`` times over; ``outputs`` receives each request's
    greedy tokens."""
    got: list[list[int]] = []

    def sink_for(g: list[int]) -> Callable[[object], None]:
        return lambda ev: g.append(ev.choice.token_id) if isinstance(ev, TokenEvent) else None

    t = clock()
    for _ in range(reps):
        got = [[] for _ in reqs]
        for i, p in enumerate(reqs):
            eng.submit(f"r{i}-{time.monotonic_ns()}", p,
                       SamplingParams(temperature=0, max_tokens=new, ignore_eos=True), sink_for(got[i]))
        eng.run_until_idle()
    dt = clock() - t
    assert all(len(g) == new for g in got)
    if outputs is not None:
        outputs[:] = got
    return reps * new * len(reqs) / dt


def run_hf(model, reqs: list[list[int]], new: int, batched: bool, outputs: list[list[int]] | None = None,
           reps: int = 1, clock: Callable[[], float] = time.perf_counter) -> float:
    kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)
    got: list[list[int]] = []
    t = clock()
    for _ in range(reps):
        if batched:
            ids = torch.tensor(reqs)                              # equal lengths: no padding needed
            out = model.generate(ids, attention_mask=torch.ones_like(ids), **kw)
            assert out.shape[1] == PROMPT_LEN + new
            got = out[:, PROMPT_LEN:].tolist()
        else:
            got = []
            for p in reqs:
                ids = torch.tensor([p])
                got.append(model.generate(ids, attention_mask=torch.ones_like(ids), **kw)[0, PROMPT_LEN:].tolist())
    dt = clock() - t
    if outputs is not None:
        outputs[:] = got
    return reps * new * len(reqs) / dt


def spread(xs: list[float]) -> float:
    """(max - min) / median: how far apart the rounds were."""
    return (max(xs) - min(xs)) / statistics.median(xs)


def cell(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} ±{100 * spread(xs) / 2:.0f}%"


def ratio(a: list[float], b: list[float]) -> str:
    """Median over rounds of a/b within the same round, with that ratio's own spread."""
    rs = [x / y for x, y in zip(a, b)]
    return f"{statistics.median(rs):.2f} ±{100 * spread(rs) / 2:.0f}%" + (" noisy" if spread(rs) > NOISY else "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--min-round-s", type=float, default=1.0,
                    help="repeat each round's workload until the engine's share lasts this long (default 1.0)")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="wall time (default) or the process's CPU time (steadier on a shared machine)")
    args = parse_cpu_args(ap, new=64, repeats=7)
    if args.repeats < 5:
        ap.error("--repeats must be at least 5 (a median of fewer rounds is not a figure to steer by)")
    clock = CLOCKS[args.clock]
    import transformers

    with tempfile.TemporaryDirectory() as tmp:
        path = model_dir(Path(tmp))
        key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"   # renamed in v5
        hf = transformers.AutoModelForCausalLM.from_pretrained(path, **{key: torch.float32}).eval()
        n_params = sum(p.numel() for p in hf.parameters())
        vocab = hf.config.vocab_size
        eng = make_engine(path)
        print(f"model: llama, {n_params / 1e6:.2f}M params, prompt {PROMPT_LEN} tokens, {args.new} new tokens/request, "
              f"torch threads {args.threads}, {args.clock} clock; sides interleaved, 1 warm-up round discarded, "
              f"median of {args.repeats} rounds ± half the spread, ratios per round; 'noisy': a spread over "
              f"{NOISY:.0%}")
        print(f"{'conc':>5} {'reps':>4} {'engine tok/s':>15} {'hf-seq tok/s':>15} {'hf-batch tok/s':>15} "
              f"{'x hf-seq':>17} {'x hf-batch':>17}  greedy = hf")
        for c in args.concurrency:
            reqs = prompts(c, vocab)
            ours: list[float] = []
            seq: list[float] = []
            bat: list[float] = []
            mine: list[list[int]] = []
            theirs: list[list[int]] = []
            reps = 1
            for round_ in range(args.repeats + 1):           # round 0 warms every side up and is discarded
                with torch.inference_mode():
                    e = run_engine(eng, reqs, args.new, mine, reps, clock)
                    s_ = run_hf(hf, reqs, args.new, False, theirs, reps, clock)
                    b = run_hf(hf, reqs, args.new, True, None, reps, clock)
                if round_:
                    ours.append(e)
                    seq.append(s_)
                    bat.append(b)
                else:   # size the measured rounds from the warm-up: the engine's share lasts >= --min-round-s
                    reps = max(1, math.ceil(args.min_round_s * e / (args.new * len(reqs))))
            same = sum(m == t for m, t in zip(mine, theirs))
            print(f"{c:>5} {reps:>4} {cell(ours):>15} {cell(seq):>15} {cell(bat):>15} {ratio(ours, seq):>17} "
                  f"{ratio(ours, bat):>17}  {same}/{len(reqs)}", flush=True)


if __name__ == "__main__":
    main()
