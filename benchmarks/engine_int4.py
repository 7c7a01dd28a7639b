"""INT4 weights: bytes vs bf16, and CPU decode speed bf16 vs int4 (aten int4pack kernel) on one model.

Bytes are those of the exchange format (packed nibbles + scales for quantised projections; the embeddings, norms and
the LM head stay dense and are counted at bf16 in both columns). Speed: `--new` greedy tokens at concurrency 1 and 8
through the engine, median of `--repeats`.

  python benchmarks/engine_int4.py [--hidden 1024] [--layers 4] [--new 32] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from cpu_args import parse_cpu_args

from reference_engine.config import EngineConfig
from reference_engine.engine import Engine
from reference_engine.model import WLinear
from reference_engine.sequence import SamplingParams
from reference_engine.tiny_checkpoint import build_checkpoint


def format_bytes(eng: Engine, phase: str) -> tuple[int, int]:
    """(bytes of the projections in this phase's format, bytes of everything else at bf16)."""
    proj = 0
    seen = set()
    for m in eng.model.modules():
        if hasattr(m, "prefill") and hasattr(m, "decode") and m is not eng.model.lm_head:
            lin: WLinear = getattr(m, phase)
            if id(lin) in seen:
                continue
            seen.add(id(lin))
            proj += lin.packed.nbytes() if lin.packed is not None else lin.weight.numel() * 2
    other = eng.model.embed_tokens.weight.numel() * 2 + eng.model.lm_head.prefill.weight.numel() * 2
    return proj, other


def tokens_per_s(eng: Engine, conc: int, new: int) -> float:
    g = torch.Generator().manual_seed(0)
    eng.submit("w", [5, 6, 7], SamplingParams(temperature=0, max_tokens=2, ignore_eos=True), lambda ev: None)
    eng.run_until_idle()
    t = time.perf_counter()
    for i in range(conc):
        eng.submit(f"r{i}", torch.randint(10, 300, (32,), generator=g).tolist(),
                   SamplingParams(temperature=0, max_tokens=new, ignore_eos=True), lambda ev: None)
    eng.run_until_idle()
    return conc * new / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    args = parse_cpu_args(ap, hidden=1024, layers=4, new=32, repeats=3)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_checkpoint(Path(tmp) / "m", "llama", hidden=args.hidden, layers=args.layers, heads=8, kv_heads=2,
                                intermediate=args.hidden * 11 // 4 // 128 * 128, vocab=512, max_pos=1024, std=0.02)
        engines = {w: Engine(EngineConfig(model_path=path, weights=w, kv_dtype="bf16", threads=args.threads))
                   for w in ("bf16", "int4")}
        bf_proj, other = format_bytes(engines["bf16"], "decode")
        i4_proj, _ = format_bytes(engines["int4"], "decode")
        n = sum(p.numel() for p in engines["bf16"].model.parameters())
        print(f"model: llama hidden {args.hidden}, {args.layers} layers, {n / 1e6:.1f}M params, group 128")
        print(f"projection weights: bf16 {bf_proj / 2**20:.2f} MiB, int4 {i4_proj / 2**20:.2f} MiB, "
              f"ratio {i4_proj / bf_proj:.4f}")
        print(f"whole model (dense parts at bf16): bf16 {(bf_proj + other) / 2**20:.2f} MiB, int4 "
              f"{(i4_proj + other) / 2**20:.2f} MiB, ratio {(i4_proj + other) / (bf_proj + other):.4f}")
        for conc in (1, 8):
            r = {w: statistics.median(tokens_per_s(e, conc, args.new) for _ in range(args.repeats))
                 for w, e in engines.items()}
            print(f"decode tok/s at concurrency {conc}: bf16 weights (fp32 compute) {r['bf16']:.1f}, "
                  f"int4 {r['int4']:.1f}, x{r['int4'] / r['bf16']:.2f}")


if __name__ == "__main__":
    main()
