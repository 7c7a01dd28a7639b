"""Fused element-wise kernels for the benchmark's decode stack (not engine ops).

Why: at batch 1 a decode step of a small model is a chain of hundreds of tiny kernels; written as plain PyTorch,
RMSNorm, RoPE and SiLU*up alone are ~35 launches per layer and their fixed cost (~2 us each, even in a CUDA graph)
would swamp the weight-reading time that BF16 vs INT4 is about.  Fusing each into one launch leaves the matmuls and
attention as the bulk of the step, which is what an optimised engine looks like and what the comparison must measure.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _add_rms_norm_kernel(x_ptr, delta_ptr, w_ptr, out_ptr, n, eps, HAS_DELTA: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + row * n + i, mask=mask, other=0.0).to(tl.float32)
    if HAS_DELTA:
        x = x + tl.load(delta_ptr + row * n + i, mask=mask, other=0.0).to(tl.float32)
        tl.store(x_ptr + row * n + i, x, mask=mask)  # the residual stream is updated in place
    r = tl.rsqrt(tl.sum(x * x, 0) / n + eps)
    w = tl.load(w_ptr + i, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * n + i, x * r * w, mask=mask)


def add_rms_norm(x: torch.Tensor, delta: torch.Tensor | None, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x += delta`` (in place, when given), then return RMSNorm(x) * w.  x, delta: contiguous [B, n]."""
    B, n = x.shape
    out = torch.empty_like(x)
    _add_rms_norm_kernel[(B,)](x, delta if delta is not None else x, w, out, n, eps, HAS_DELTA=delta is not None,
                               BLOCK=triton.next_power_of_2(n))
    return out


@triton.jit
def _bias_rope_split_kernel(qkv_ptr, bias_ptr, cos_ptr, sin_ptr, q_ptr, k_ptr, v_ptr, row_stride,
                            HEADS: tl.constexpr, KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)  # 0..HEADS+2*KV_HEADS-1 over the fused projection's q, k, v heads
    HALF: tl.constexpr = HEAD_DIM // 2
    i = tl.arange(0, HALF)
    base = qkv_ptr + b * row_stride + h * HEAD_DIM
    x1 = tl.load(base + i).to(tl.float32) + tl.load(bias_ptr + h * HEAD_DIM + i).to(tl.float32)
    x2 = tl.load(base + HALF + i).to(tl.float32) + tl.load(bias_ptr + h * HEAD_DIM + HALF + i).to(tl.float32)
    if h < HEADS + KV_HEADS:
        c = tl.load(cos_ptr + i).to(tl.float32)
        s = tl.load(sin_ptr + i).to(tl.float32)
        y1 = x1 * c - x2 * s
        y2 = x2 * c + x1 * s
        if h < HEADS:
            dst = q_ptr + (b * HEADS + h) * HEAD_DIM
        else:
            dst = k_ptr + (b * KV_HEADS + h - HEADS) * HEAD_DIM
        tl.store(dst + i, y1)
        tl.store(dst + HALF + i, y2)
    else:
        dst = v_ptr + (b * KV_HEADS + h - HEADS - KV_HEADS) * HEAD_DIM
        tl.store(dst + i, x1)
        tl.store(dst + HALF + i, x2)


def bias_rope_split(qkv: torch.Tensor, bias: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int,
                    kv_heads: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fused QKV output [B, (H + 2 Hkv) * D] -> q [B, H, D], k, v [B, Hkv, D]: bias added, RoPE (rotate-half) on q, k.

    ``cos``/``sin`` [D / 2] are for the one position every sequence decodes at in the benchmark.
    """
    B = qkv.shape[0]
    q = torch.empty(B, heads, head_dim, dtype=qkv.dtype, device=qkv.device)
    k = torch.empty(B, kv_heads, head_dim, dtype=qkv.dtype, device=qkv.device)
    v = torch.empty_like(k)
    _bias_rope_split_kernel[(B, heads + 2 * kv_heads)](qkv, bias, cos, sin, q, k, v, qkv.stride(0),
                                                       HEADS=heads, KV_HEADS=kv_heads, HEAD_DIM=head_dim)
    return q, k, v


@triton.jit
def _silu_mul_kernel(gu_ptr, out_ptr, inter, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    i = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = i < inter
    g = tl.load(gu_ptr + b * 2 * inter + i, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(gu_ptr + b * 2 * inter + inter + i, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + b * inter + i, g / (1.0 + tl.exp(-g)) * u, mask=mask)


def silu_mul(gu: torch.Tensor) -> torch.Tensor:
    """[B, 2 I] (gate | up) -> silu(gate) * up [B, I]."""
    B, two_i = gu.shape
    inter = two_i // 2
    out = torch.empty(B, inter, dtype=gu.dtype, device=gu.device)
    BLOCK = 1024
    _silu_mul_kernel[(B, triton.cdiv(inter, BLOCK))](gu, out, inter, BLOCK=BLOCK)
    return out
