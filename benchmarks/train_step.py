"""Time of one `training.train` step on this CPU, per Newton-Schulz precision of Muon and context-target share.

Why: within the 45-minute budget the shipped model's quality follows its step count (MODEL_CARD.md), so a faster
step is a better model. This times what the training loop does per step (``training.train.recipe_loss`` and
``apply_update``: weighted loss, backward, gradient clip, Muon + AdamW, the running averages) with the default
recipe's weights, on the shipped model's shape, with random tokens in batches shaped like the
training corpus's (rows x width <= 1,536 tokens, about a fifth of them targets). Each configuration runs
`--repeats` times, interleaved so a machine that speeds up or slows down affects all alike; the median is printed,
with its speed against the first configuration's. A configuration is `DTYPE` (`--muon-ns-dtype`) or `DTYPE:SHARE`
(also `--context-weight 0.3 --context-share SHARE`, whose extra LM-head work is its cost).

  python benchmarks/train_step.py [--configs float32 bfloat16 float32:0.5] [--steps 60] [--repeats 5] [--averages 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from training.batching import Batch
from training.model import TinyLlama
from training.optim import NS_DTYPES, bfloat16_matmul_is_fast, build_optimizers
from training.train import apply_update, build_parser, model_config, recipe_loss

#: rows x width of typical training batches (documents of similar length, one per row)
BATCH_SHAPES = [(12, 128), (8, 192), (6, 256), (4, 384), (3, 512), (2, 768), (1, 1024)]
VOCAB = 2048  # the shipped tokenizer's
PAD_ID = 0
CALL_TOKEN_ID = 5


def batches(seed: int = 0) -> list[Batch]:
    """Random tokens (never the padding id), about a fifth of them answer targets, no name or key marked."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for rows, width in BATCH_SHAPES:
        ids = torch.randint(PAD_ID + 3, VOCAB, (rows, width), generator=g)
        targets = torch.rand(rows, width, generator=g) < 0.22
        out.append(Batch(ids, targets, schema=torch.zeros(rows, width, dtype=torch.uint8)))
    return out


def parse_config(text: str) -> tuple[str, float]:
    """``DTYPE`` or ``DTYPE:SHARE`` -> (Newton-Schulz dtype, context share; 0 for none)."""
    dtype, _, share = text.partition(":")
    if dtype not in NS_DTYPES:
        raise argparse.ArgumentTypeError(f"configuration {text!r}: dtype must be one of {', '.join(NS_DTYPES)}")
    return dtype, float(share) if share else 0.0


def time_steps(ns_dtype: str, context_share: float, steps: int, n_averages: int) -> float:
    """Seconds per step of ``training.train``'s default recipe with these two options, after a warm-up pass over
    every batch shape."""
    context = ["--context-weight", "0.3", "--context-share", str(context_share)] if context_share else [
        "--context-weight", "0"]
    recipe = build_parser().parse_args(["--muon-ns-dtype", ns_dtype, *context])
    torch.manual_seed(7)
    model = TinyLlama(model_config(recipe, VOCAB))
    optimizers = build_optimizers(model, "muon", recipe.lr, NS_DTYPES[ns_dtype])
    averages = [AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(recipe.ema_decay)) for _ in range(n_averages)]
    data = batches()

    def step(batch: Batch) -> None:
        loss = recipe_loss(model, batch, recipe, CALL_TOKEN_ID, PAD_ID)
        apply_update(model, loss, optimizers, averages)
        loss.item()

    for batch in data:
        step(batch)
    start = time.perf_counter()
    for i in range(steps):
        step(data[i % len(data)])
    return (time.perf_counter() - start) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", type=parse_config, default=[parse_config(d) for d in NS_DTYPES])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--averages", type=int, default=3, help="running averages updated per step (--also-ema runs: 3)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tokens = sum(r * w for r, w in BATCH_SHAPES) / len(BATCH_SHAPES)
    print(f"torch {torch.__version__}, {args.threads} threads, bfloat16 matrix units: {bfloat16_matmul_is_fast()}, "
          f"{tokens:.0f} tokens per step on average")
    times: dict[tuple[str, float], list[float]] = {c: [] for c in args.configs}
    for _ in range(args.repeats):
        for dtype, share in args.configs:
            times[dtype, share].append(time_steps(dtype, share, args.steps, args.averages))
    base = statistics.median(times[args.configs[0]])
    for (dtype, share), seconds in times.items():
        med = statistics.median(seconds)
        label = f"Newton-Schulz in {dtype}, " + (f"context share {share}" if share else "answers only")
        print(f"{label:48s}: median {med * 1000:6.1f} ms/step ({tokens / med:,.0f} tokens/s) over {len(seconds)} "
              f"runs of {args.steps} steps; {base / med:.2f}x the first configuration's speed")


if __name__ == "__main__":
    main()
