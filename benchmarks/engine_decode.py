"""Decode throughput of the reference engine vs HF transformers `generate`, same model, CPU.

A Llama-shaped model of ~3.5M parameters is written to a temp folder (random weights). Both sides generate exactly
`--new` tokens per request, greedily, with the same torch thread count. Baselines:
  * hf-sequential: one `generate` call per request, one after another (a server without batching);
  * hf-batched: one `generate` call for all requests at once (static batch, left padding), an upper bound for
    batching without paging.
Ours: all requests submitted at once to the engine (continuous batching, paged KV). Figures are generated tokens per
second of wall time (prefill included on both sides); the median of `--repeats` runs is printed.

  python benchmarks/engine_decode.py [--concurrency 1 8 32] [--new 64] [--repeats 3] [--threads 1]
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
from reference_engine.sequence import SamplingParams
from reference_engine.tiny_checkpoint import build_checkpoint

PROMPT_LEN = 32


def model_dir(root: Path) -> Path:
    return build_checkpoint(root / "bench-llama", "llama", hidden=256, layers=4, heads=8, kv_heads=4,
                            intermediate=768, vocab=512, max_pos=1024)


def prompts(n: int, vocab: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(10, vocab - 10, (PROMPT_LEN,), generator=g).tolist() for _ in range(n)]


def run_engine(path: Path, reqs: list[list[int]], new: int, **cfg) -> float:
    eng = Engine(EngineConfig(model_path=path, weights="fp32", kv_dtype=cfg.pop("kv", "fp32"),
                              threads=torch.get_num_threads(), kv_budget_bytes=256 << 20, **cfg))
    # warm-up (allocator, first-call overheads)
    eng.submit("w", reqs[0], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True), lambda ev: None)
    eng.run_until_idle()
    t = time.perf_counter()
    for i, p in enumerate(reqs):
        eng.submit(f"r{i}", p, SamplingParams(temperature=0, max_tokens=new, ignore_eos=True), lambda ev: None)
    eng.run_until_idle()
    dt = time.perf_counter() - t
    assert eng.metrics.generation_tokens == 4 + new * len(reqs)
    return new * len(reqs) / dt


def run_hf(model, reqs: list[list[int]], new: int, batched: bool) -> float:
    kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)
    model.generate(torch.tensor([reqs[0]]), max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0)
    t = time.perf_counter()
    if batched:
        ids = torch.tensor(reqs)                              # equal lengths: no padding needed
        out = model.generate(ids, attention_mask=torch.ones_like(ids), **kw)
        assert out.shape[1] == PROMPT_LEN + new
    else:
        for p in reqs:
            ids = torch.tensor([p])
            model.generate(ids, attention_mask=torch.ones_like(ids), **kw)
    return new * len(reqs) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = parse_cpu_args(ap, new=64, repeats=3)
    import transformers

    with tempfile.TemporaryDirectory() as tmp:
        path = model_dir(Path(tmp))
        key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"   # renamed in v5
        hf = transformers.AutoModelForCausalLM.from_pretrained(path, **{key: torch.float32}).eval()
        n_params = sum(p.numel() for p in hf.parameters())
        vocab = hf.config.vocab_size
        print(f"model: llama, {n_params / 1e6:.2f}M params, prompt {PROMPT_LEN} tokens, {args.new} new tokens/request, "
              f"torch threads {args.threads}, median of {args.repeats}")
        print(f"{'conc':>5} {'engine tok/s':>13} {'hf-seq tok/s':>13} {'hf-batch tok/s':>15} {'x hf-seq':>9} "
              f"{'x hf-batch':>10}")
        for c in args.concurrency:
            reqs = prompts(c, vocab)
            ours = statistics.median(run_engine(path, reqs, args.new) for _ in range(args.repeats))
            with torch.inference_mode():
                seq = statistics.median(run_hf(hf, reqs, args.new, False) for _ in range(args.repeats))
                bat = statistics.median(run_hf(hf, reqs, args.new, True) for _ in range(args.repeats))
            print(f"{c:>5} {ours:>13.1f} {seq:>13.1f} {bat:>15.1f} {ours / seq:>9.2f} {ours / bat:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
