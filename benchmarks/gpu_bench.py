"""GPU measurements of the Triton kernels (issue #8), printed as one table and saved as JSON.

Run by ``benchmarks/gpu_check.sh`` on a lent GPU (H200: peak HBM bandwidth ~4.8 TB/s).  ``--smoke`` runs every code
path on the CPU under Triton's interpreter with toy shapes, to check the script itself; its timings mean nothing.

Measures (goal in brackets):
  * correctness at realistic shapes against the engine's PyTorch ops (max abs error),
  * INT4 GEMV effective bandwidth vs peak, with the L2 flushed between runs (>= 70% on large matrices),
  * single-request decode tokens/s, BF16 vs INT4 weights, random-weight Qwen2.5-0.5B/1.5B shapes (>= 1.55x),
  * FP8 vs BF16 KV pool capacity (tokens per GiB) and decode speed at long context,
  * cost of the fused page-tag check in the attention kernel and in a whole decode step (< 1%).
Decode steps are captured in CUDA graphs so that Python launch overhead does not hide the kernels.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

SMOKE = "--smoke" in sys.argv
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"

import triton  # noqa: E402
from gpu_fused import add_rms_norm, bias_rope_split, silu_mul  # noqa: E402
from gpu_model import SHAPES, DecodeStack, rms_norm_ref, rope_ref  # noqa: E402

from reference_engine.kernels import torch_ops  # noqa: E402
from reference_engine.kernels.triton_attention import paged_decode_attention_impl  # noqa: E402
from reference_engine.kernels.triton_int4 import int4_linear_impl  # noqa: E402
from reference_engine.quant import dequantize_int4, quantize_int4  # noqa: E402

ROWS: list[tuple[str, str, str, str]] = []  # (section, what, value, goal/verdict)
RESULTS: dict[str, object] = {}


def row(section: str, what: str, value: str, goal: str = "") -> None:
    ROWS.append((section, what, value, goal))
    print(f"  {section:<12} {what:<58} {value:>22}  {goal}", flush=True)


def bench_ms(fn, device: torch.device) -> float:
    """Median kernel time in ms; L2 flushed between runs by do_bench (so weights come from HBM)."""
    if device.type != "cuda":
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def graph_ms(fn, device: torch.device, iters: int, repeats: int = 5) -> float:
    """Median ms per call of ``fn`` replayed from a CUDA graph (plain calls on the CPU smoke run)."""
    for _ in range(3):  # compile every kernel variant before capture
        fn()
    if device.type != "cuda":
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(5):
        graph.replay()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / iters)
    del graph
    return statistics.median(times)


def check_correctness(device: torch.device, smoke: bool) -> None:
    """Kernels vs the engine's PyTorch ops at a realistic shape (complements the tiny-shape unit tests)."""
    shape = SHAPES["smoke" if smoke else "qwen2.5-0.5b"]
    for kv in ("bf16", "fp8"):
        st = DecodeStack(shape, weights="bf16", kv=kv, batch=3, context=37 if smoke else 3001, device=device, seed=1)
        kp, vp, ks, vs = st.pools[0]
        q = torch.randn(3, shape.heads, shape.head_dim, device=device).bfloat16()
        args = (q, kp, vp, ks, vs, st.block_tables, st.seq_lens, st.page_tags, st.expected_tags, st.scale)
        out, bad = paged_decode_attention_impl(*args)
        want, want_bad = torch_ops.paged_decode_attention(*args)
        err = (out.float() - want.float()).abs().max().item()
        ok = err < 3e-2 and torch.equal(bad, want_bad)
        RESULTS[f"attn_err_{kv}"] = err
        row("correct", f"paged attention {kv} pages vs torch_ops (max abs err)", f"{err:.2e}", "ok" if ok else "FAIL")
    g = torch.Generator(device=device).manual_seed(0)
    hid, H, Hkv, D = shape.hidden, shape.heads, shape.kv_heads, shape.head_dim
    x = torch.randn(2, hid, device=device, generator=g).bfloat16()
    dx = torch.randn(2, hid, device=device, generator=g).bfloat16()
    w = torch.rand(hid, device=device, generator=g).bfloat16()
    want = rms_norm_ref((x.float() + dx.float()).bfloat16(), w)
    x2 = x.clone()
    got = add_rms_norm(x2, dx, w)
    errs = [(got.float() - want.float()).abs().max().item()]
    qkv = torch.randn(2, (H + 2 * Hkv) * D, device=device, generator=g).bfloat16()
    bias = torch.randn((H + 2 * Hkv) * D, device=device, generator=g).bfloat16()
    ang = torch.rand(D // 2, device=device, generator=g) * 6
    q, k, v = bias_rope_split(qkv, bias, ang.cos().bfloat16(), ang.sin().bfloat16(), H, Hkv, D)
    full = (qkv.float() + bias.float()).bfloat16().view(2, H + 2 * Hkv, D)
    errs.append((q.float()
                 - rope_ref(full[:, :H], ang.cos().bfloat16(), ang.sin().bfloat16()).float()).abs().max().item())
    errs.append((v.float() - full[:, H + Hkv:].float()).abs().max().item())
    gu = torch.randn(2, 2 * shape.intermediate, device=device, generator=g).bfloat16()
    ref_sm = (torch.nn.functional.silu(gu[:, :shape.intermediate].float()) * gu[:, shape.intermediate:].float())
    errs.append((silu_mul(gu).float() - ref_sm).abs().max().item())
    err = max(errs)
    RESULTS["fused_elementwise_err"] = err
    row("correct", "benchmark's fused norm / rope / silu vs PyTorch (max abs err)", f"{err:.2e}",
        "ok" if err < 0.1 else "FAIL")
    K, N = (128, 96) if smoke else (4864, 896)
    w = torch.randn(N, K, device=device, generator=g)
    p = quantize_int4(w, 128 if K % 128 == 0 else 64)
    for M in (1, 8):
        x = torch.randn(M, K, device=device, generator=g).bfloat16()
        y = int4_linear_impl(x, p.qweight, p.scales, p.zeros, p.group_size).float()
        want = x.float() @ dequantize_int4(p).to(device).t()
        rel = ((y - want).abs().max() / want.abs().max()).item()
        RESULTS[f"int4_rel_err_m{M}"] = rel
        row("correct", f"int4 linear M={M} {N}x{K} vs dequantised matmul (rel err)", f"{rel:.2e}",
            "ok" if rel < 1e-2 else "FAIL")


def gemv_bandwidth(device: torch.device, smoke: bool, peak: float) -> None:
    shapes = [(96, 128)] if smoke else [(1152, 896), (896, 896), (9728, 896), (896, 4864),
                                         (8192, 8192), (28672, 8192), (8192, 28672)]
    best = 0.0
    g = torch.Generator(device=device).manual_seed(0)
    for N, K in shapes:
        w = torch.randn(N, K, device=device, generator=g, dtype=torch.bfloat16)
        p = quantize_int4(w, 128 if K % 128 == 0 else 64)
        x = torch.randn(1, K, device=device, generator=g, dtype=torch.bfloat16)
        t4 = bench_ms(lambda x=x, p=p: int4_linear_impl(x, p.qweight, p.scales, None, p.group_size), device)
        t16 = bench_ms(lambda x=x, w=w: torch.nn.functional.linear(x, w), device)
        nbytes = p.nbytes() + (K + N) * 2
        bw = nbytes / (t4 * 1e-3)
        frac = bw / peak
        big = N * K >= 8192 * 8192
        if big:
            best = max(best, frac)
        RESULTS[f"gemv_{N}x{K}"] = {"int4_us": t4 * 1e3, "bf16_us": t16 * 1e3, "int4_TBps": bw / 1e12}
        row("int4 gemv", f"N={N} K={K}: int4 {t4 * 1e3:.1f} us, bf16 {t16 * 1e3:.1f} us, x{t16 / t4:.2f}",
            f"{bw / 1e12:.2f} TB/s {100 * frac:.0f}%", "")
    # small sweep of launch shapes on one large matrix: tells the next session which defaults to keep
    N, K = (96, 128) if smoke else (28672, 8192)
    w = torch.randn(N, K, device=device, generator=g, dtype=torch.bfloat16)
    p = quantize_int4(w, 128 if K % 128 == 0 else 64)
    x = torch.randn(1, K, device=device, generator=g, dtype=torch.bfloat16)
    sweep = {}
    configs = [(bn, nw, st) for bn in (16, 32, 64) for nw in (2, 4, 8) for st in (2, 4)]
    for bn, nw, st in configs[:2] if smoke else configs:
        t = bench_ms(lambda bn=bn, nw=nw, st=st: int4_linear_impl(x, p.qweight, p.scales, None, p.group_size,
                                                                  block_n=bn, num_warps=nw, num_stages=st), device)
        sweep[f"block_n={bn} warps={nw} stages={st}"] = (p.nbytes() + (K + N) * 2) / (t * 1e-3)
    cfg, bw = max(sweep.items(), key=lambda kv: kv[1])
    best = max(best, bw / peak)
    RESULTS["gemv_sweep_TBps"] = {k: v / 1e12 for k, v in sweep.items()}
    row("int4 gemv", f"sweep N={N} K={K}, best: {cfg}", f"{bw / 1e12:.2f} TB/s {100 * bw / peak:.0f}%", "")
    RESULTS["gemv_best_large_fraction_of_peak"] = best
    if not smoke:
        row("int4 gemv", f"best fraction of {peak / 1e12:.1f} TB/s peak (matrices >= 8192x8192)",
            f"{100 * best:.0f}%", "goal >= 70%: " + ("met" if best >= 0.70 else "NOT met"))


def decode_speed(device: torch.device, smoke: bool, model: str, context: int, iters: int) -> None:
    shape = SHAPES["smoke" if smoke else model]
    ms = {}
    for label, weights, head in (("bf16", "bf16", False), ("int4", "int4", False), ("int4+head", "int4", True)):
        st = DecodeStack(shape, weights=weights, kv="bf16", batch=1, context=context, device=device, seed=2,
                         int4_lm_head=head)
        ms[label] = graph_ms(st.step, device, iters)
        RESULTS[f"decode_{shape.name}_{label}_ms"] = ms[label]
        what = "int4 weights, int4 LM head" if head else f"{weights} weights, bf16 LM head"
        row("decode", f"{shape.name} B=1 ctx={context} {what} ({st.weight_bytes() / 2**20:.0f} MiB)",
            f"{1e3 / ms[label]:.0f} tok/s", f"{ms[label]:.3f} ms/step")
        del st
    for label in ("int4", "int4+head"):
        ratio = ms["bf16"] / ms[label]
        RESULTS[f"decode_{shape.name}_{label}_speedup"] = ratio
        row("decode", f"{shape.name} {label.upper()} / BF16 decode speed", f"x{ratio:.2f}",
            "" if smoke else "goal >= 1.55x: " + ("met" if ratio >= 1.55 else "NOT met"))


def long_context(device: torch.device, smoke: bool, context: int, batch: int, iters: int) -> None:
    shape = SHAPES["smoke" if smoke else "qwen2.5-0.5b"]
    ms, per_gib, attn = {}, {}, {}
    base = None
    for kv in ("bf16", "fp8"):
        st = DecodeStack(shape, weights="int4", kv=kv, batch=batch, context=context, device=device, seed=3,
                         share_weights_from=base)
        base = st
        per_gib[kv] = batch * context / (st.kv_bytes() / 2**30)
        kp, vp, ks, vs = st.pools[0]
        q = torch.randn(batch, shape.heads, shape.head_dim, device=device).bfloat16()
        args = (q, kp, vp, ks, vs, st.block_tables, st.seq_lens, st.page_tags, st.expected_tags, st.scale)
        attn[kv] = bench_ms(lambda args=args: paged_decode_attention_impl(*args), device)
        ms[kv] = graph_ms(st.step, device, iters)
        row("kv", f"{kv} KV: capacity (all {shape.layers} layers)", f"{per_gib[kv]:.0f} tok/GiB", "")
        row("kv", f"{kv} KV: attention kernel, B={batch} ctx={context}, one layer", f"{attn[kv] * 1e3:.1f} us", "")
        row("kv", f"{kv} KV: decode step INT4 weights, B={batch} ctx={context}",
            f"{batch * 1e3 / ms[kv]:.0f} tok/s", f"{ms[kv]:.3f} ms/step")
    RESULTS.update({"kv_tokens_per_gib": per_gib, "kv_attn_ms": attn, "kv_step_ms": ms})
    row("kv", "FP8 / BF16 capacity", f"x{per_gib['fp8'] / per_gib['bf16']:.2f}", "")
    row("kv", "FP8 / BF16 attention kernel speed", f"x{attn['bf16'] / attn['fp8']:.2f}", "")
    row("kv", "FP8 / BF16 decode step speed at long context", f"x{ms['bf16'] / ms['fp8']:.2f}", "")


def tag_overhead(device: torch.device, smoke: bool, context: int, iters: int) -> None:
    shape = SHAPES["smoke" if smoke else "qwen2.5-0.5b"]
    for batch, ctx in ((1, 1024 if not smoke else 40), (8 if not smoke else 2, context)):
        st = DecodeStack(shape, weights="bf16", kv="fp8", batch=batch, context=ctx, device=device, seed=4)
        kp, vp, ks, vs = st.pools[0]
        q = torch.randn(batch, shape.heads, shape.head_dim, device=device).bfloat16()
        args = (q, kp, vp, ks, vs, st.block_tables, st.seq_lens, st.page_tags, st.expected_tags, st.scale)
        on, off = [], []
        for _ in range(3):  # alternate to cancel drift (clocks, other tenants)
            on.append(bench_ms(lambda args=args: paged_decode_attention_impl(*args, check_tags=True), device))
            off.append(bench_ms(lambda args=args: paged_decode_attention_impl(*args, check_tags=False), device))
        over = statistics.median(on) / statistics.median(off) - 1
        RESULTS[f"tag_overhead_attention_b{batch}_ctx{ctx}"] = over
        row("tags", f"attention kernel B={batch} ctx={ctx}: check on vs off", f"{100 * over:+.2f}%",
            f"{statistics.median(off) * 1e3:.1f} us off")
        del st
    ctx = 1024 if not smoke else 40
    base = DecodeStack(shape, weights="int4", kv="fp8", batch=1, context=ctx, device=device, seed=5)
    off_st = DecodeStack(shape, weights="int4", kv="fp8", batch=1, context=ctx, device=device, seed=5,
                         check_tags=False, share_weights_from=base)
    on, off = [], []
    for _ in range(3):
        on.append(graph_ms(base.step, device, iters, repeats=3))
        off.append(graph_ms(off_st.step, device, iters, repeats=3))
    over = statistics.median(on) / statistics.median(off) - 1
    RESULTS["tag_overhead_decode_step"] = over
    row("tags", f"decode step ({shape.name}, INT4, FP8 KV, B=1 ctx={ctx}, check in layer 0): on vs off",
        f"{100 * over:+.2f}%",
        "" if smoke else "goal < 1%: " + ("met" if over < 0.01 else "NOT met"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="CPU interpreter, toy shapes: checks the script only")
    ap.add_argument("--peak-tbps", type=float, default=4.8, help="HBM peak of the GPU (H200: 4.8)")
    ap.add_argument("--long-context", type=int, default=32768)
    ap.add_argument("--long-batch", type=int, default=8)
    ap.add_argument("--iters", type=int, default=50, help="graph replays per timing")
    ap.add_argument("--skip", default="", help="comma list of sections to skip: correct,gemv,decode,kv,tags,1.5b")
    ap.add_argument("--json", default=os.environ.get("OUT", "."), help="folder for gpu_bench.json")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if args.smoke:
        device = torch.device("cpu")
        args.long_context, args.long_batch, args.iters = 45, 2, 1
    else:
        if not torch.cuda.is_available():
            print("gpu_bench: no CUDA device (use --smoke to check the script on a CPU)", file=sys.stderr)
            return 2
        device = torch.device("cuda")
        torch.backends.cuda.matmul.allow_tf32 = True
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu (interpreter smoke run)"
    print(f"gpu_bench on {name}; torch {torch.__version__}, triton {triton.__version__}", flush=True)
    RESULTS["device"], RESULTS["torch"], RESULTS["triton"] = name, torch.__version__, triton.__version__
    t0 = time.time()
    sections = [
        ("correct", lambda: check_correctness(device, args.smoke)),
        ("gemv", lambda: gemv_bandwidth(device, args.smoke, args.peak_tbps * 1e12)),
        ("decode", lambda: decode_speed(device, args.smoke, "qwen2.5-0.5b", 40 if args.smoke else 1024, args.iters)),
        ("1.5b", lambda: None if args.smoke else decode_speed(device, False, "qwen2.5-1.5b", 1024, args.iters)),
        ("kv", lambda: long_context(device, args.smoke, args.long_context, args.long_batch, args.iters)),
        ("tags", lambda: tag_overhead(device, args.smoke, args.long_context, args.iters)),
    ]
    for name_, fn in sections:
        if name_ in skip:
            continue
        try:  # one broken section must not cost the others' figures (device time is scarce)
            fn()
        except Exception as exc:  # noqa: BLE001 - reported in the table, the run goes on
            import traceback

            traceback.print_exc()
            row(name_, f"section failed: {type(exc).__name__}: {str(exc).splitlines()[0][:50]}", "-", "FAIL")
        if device.type == "cuda":
            torch.cuda.empty_cache()
    RESULTS["wall_s"] = time.time() - t0
    print("\n" + "=" * 118)
    print(f"{'section':<12} {'measurement':<58} {'value':>22}  goal / note")
    print("-" * 118)
    for r in ROWS:
        print(f"{r[0]:<12} {r[1]:<58} {r[2]:>22}  {r[3]}")
    print("=" * 118)
    print(f"total {RESULTS['wall_s']:.0f} s on {name}")
    out = Path(args.json)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_bench.json").write_text(json.dumps(RESULTS, indent=2, default=str))
    failed = [r for r in ROWS if r[3] == "FAIL"]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
