"""KV cache figures: FP8 vs BF16 pool capacity at equal bytes, and the page-tag check's cost per decode step.

Capacity: tokens a pool holds for the same byte budget, for a few model shapes (scales and tags included).
Tag check: one engine decoding `--concurrency` long requests; the check is switched on and off on alternate steps
(same batch, same cache contents), so machine noise hits both modes alike; median step time of each mode, plus the
direct cost of the check op (x layers) relative to the median step.

  python benchmarks/engine_kv.py [--concurrency 32] [--steps 200] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from cpu_args import parse_cpu_args

from reference_engine.config import EngineConfig, ModelConfig
from reference_engine.engine import Engine
from reference_engine.kernels import torch_ops
from reference_engine.kv_cache import KVPool
from reference_engine.sequence import SamplingParams
from reference_engine.tiny_checkpoint import build_checkpoint

SHAPES = {  # name: (layers, kv_heads, head_dim)
    "tiny(2x2x32)": (2, 2, 32),
    "qwen2.5-0.5b(24x2x64)": (24, 2, 64),
    "llama-3-8b(32x8x128)": (32, 8, 128),
}


def capacity_table(budget: int) -> None:
    print(f"KV pool capacity at {budget >> 20} MiB, page 16 tokens")
    print(f"{'shape':>24} {'bf16 tokens':>12} {'fp8 tokens':>11} {'ratio':>6}")
    for name, (layers, kvh, hd) in SHAPES.items():
        cfg = ModelConfig.from_dict({"architectures": ["LlamaForCausalLM"], "vocab_size": 8, "hidden_size": kvh * hd,
                                     "intermediate_size": 8, "num_hidden_layers": layers, "num_attention_heads": kvh,
                                     "num_key_value_heads": kvh, "head_dim": hd})
        with torch.device("meta"):
            bf = KVPool(cfg, kv_dtype="bf16", page_size=16, budget_bytes=budget, device="meta")
            f8 = KVPool(cfg, kv_dtype="fp8", page_size=16, budget_bytes=budget, device="meta")
        print(f"{name:>24} {bf.capacity_tokens:>12} {f8.capacity_tokens:>11} "
              f"{f8.capacity_tokens / bf.capacity_tokens:>6.3f}")


def tag_cost(conc: int, steps: int, prompt_len: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = build_checkpoint(Path(tmp) / "m", "llama", hidden=256, layers=4, heads=8, kv_heads=4,
                                intermediate=768, vocab=512, max_pos=4096)
        eng = Engine(EngineConfig(model_path=path, weights="fp32", kv_dtype="bf16", threads=torch.get_num_threads(),
                                  kv_budget_bytes=512 << 20, max_num_seqs=conc))
        g = torch.Generator().manual_seed(0)
        for i in range(conc):
            eng.submit(f"r{i}", torch.randint(10, 300, (prompt_len,), generator=g).tolist(),
                       SamplingParams(temperature=0, max_tokens=steps + 10, ignore_eos=True), lambda ev: None)
        eng._drain_inbox()
        eng.step()                                         # prefill everyone
        times = {True: [], False: []}
        for i in range(steps):
            mode = i % 2 == 0
            eng.config.check_page_tags = mode
            t = time.perf_counter()
            eng.step()
            times[mode].append(time.perf_counter() - t)
        on, off = statistics.median(times[True]), statistics.median(times[False])
        seqs = eng.scheduler.running
        bt, et = eng.blocks.tag_tensors(seqs, "cpu")
        n = 2000
        t = time.perf_counter()
        for _ in range(n):
            torch_ops.check_tags(eng.pool.page_tags, bt, et)
        op = (time.perf_counter() - t) / n            # on CPU the engine checks once per step (layer 0)
        print(f"page-tag check, {conc} sequences x ~{prompt_len + steps // 2} tokens, {steps} decode steps "
              f"(alternating), bf16 KV:")
        print(f"  median step: check on {on * 1e3:.3f} ms, off {off * 1e3:.3f} ms, difference "
              f"{(on - off) / off * 100:+.2f}%")
        print(f"  check op alone: {op * 1e6:.1f} us per step (once per step on CPU) = {op / off * 100:.2f}% of a step")


def main() -> None:
    ap = argparse.ArgumentParser()
    args = parse_cpu_args(ap, concurrency=32, steps=200, prompt=512, budget_mib=1024)
    capacity_table(args.budget_mib << 20)
    tag_cost(args.concurrency, args.steps, args.prompt)


if __name__ == "__main__":
    main()
