"""Time of one `training.train` step on this CPU, per Newton-Schulz precision of Muon and context-target share.

Why: within the 45-minute budget the shipped model's quality follows its step count (MODEL_CARD.md), so a faster
step is a better model. This times what the training loop does per step (weighted loss, backward, gradient clip,
Muon + AdamW, the running averages) on the shipped model's shape, with random tokens in batches shaped like the
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

from training.model import TinyConfig, TinyLlama
from training.optim import NS_DTYPES, bfloat16_matmul_is_fast, build_optimizers
from training.train import Batch, masked_loss

#: rows x width of typical training batches (documents of similar length, one per row)
BATCH_SHAPES = [(12, 128), (8, 192), (6, 256), (4, 384), (3, 512), (2, 768), (1, 1024)]
SHIPPED_SHAPE = TinyConfig(vocab_size=2048, hidden_size=128, intermediate_size=384, num_hidden_layers=6,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)


def batches(seed: int = 0) -> list[Batch]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for rows, width in BATCH_SHAPES:
        ids = torch.randint(PAD_ID + 3, SHIPPED_SHAPE.vocab_size, (rows, width), generator=g)
        targets = torch.rand(rows, width, generator=g) < 0.22
        out.append(Batch(ids, targets))
    return out


PAD_ID = 0


def parse_config(text: str) -> tuple[str, float]:
    """``DTYPE`` or ``DTYPE:SHARE`` -> (Newton-Schulz dtype, context share; 0 for none)."""
    dtype, _, share = text.partition(":")
    if dtype not in NS_DTYPES:
        raise argparse.ArgumentTypeError(f"configuration {text!r}: dtype must be one of {', '.join(NS_DTYPES)}")
    return dtype, float(share) if share else 0.0


def time_steps(ns_dtype: str, context_share: float, steps: int, n_averages: int) -> float:
    """Seconds per step, after a warm-up pass over every batch shape."""
    torch.manual_seed(7)
    model = TinyLlama(SHIPPED_SHAPE)
    optimizers = build_optimizers(model, "muon", 4e-3, NS_DTYPES[ns_dtype])
    averages = [AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999)) for _ in range(n_averages)]
    data = batches()

    def step(batch: Batch) -> None:
        loss = masked_loss(model, batch, 5.0, 15.0, 5, context_weight=0.3 if context_share else 0.0,
                           context_share=context_share or 1.0, pad_id=PAD_ID)
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for opt in optimizers:
            opt.step()
        for average in averages:
            average.update_parameters(model)
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
