"""Writing new K/V rows into the paged pool: plain scatter for bf16/fp16/fp32 pools, fused scale + cast + scatter for
float8_e4m3fn pools.

FP8 scale rule (docs/CONTRACTS.md): each page-head has one float32 scale, ``amax / 448`` of what it holds.  When new
tokens land in a page that already holds tokens (the first new offset is > 0) and their amax needs a larger scale, the
page-head's existing entries are requantised to that larger scale; a page whose first new offset is 0 starts afresh
(its old contents are stale; the engine's block manager also resets a reassigned page's scale to 0, and with that
reset this rule and ``torch_ops.write_kv``'s ``max(old, amax / 448)`` agree exactly).  The scale never shrinks while a
page is partially filled, so earlier tokens lose at most one extra rounding.  An all-zero page-head keeps scale 0.

Why one program per (run of tokens in one page, KV head): all tokens of a call that go to the same page must agree on
the final scale before any of them is written, and the requantisation of the old entries must happen exactly once.
The program whose token starts such a run (its predecessor in ``slot_mapping`` maps to another page) owns the whole
run; the other programs of the grid exit at once.  This needs a page's new tokens to be contiguous in
``slot_mapping``, which holds for every engine that lays out each sequence's new tokens together (ours does).
Within one call the result equals quantising every token of the page-head with the final scale, i.e. the sequential
rule without its intermediate double rounding.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from reference_engine.kernels.triton_common import FP8_E4M3_MAX, check_device, round_to_e4m3


@triton.jit
def _scatter_kernel(
    k_ptr, v_ptr, kp_ptr, vp_ptr, slot_ptr,
    stride_kt, stride_kh, stride_vt, stride_vh,
    stride_kpp, stride_kps, stride_kph, stride_vpp, stride_vps, stride_vph,
    NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, PAGE_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t)
    h = tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    heads_here = tl.where(slot >= 0, NUM_KV_HEADS, 0)  # negative slot (padding): nothing to write
    mask = (h[:, None] < heads_here) & (d[None, :] < HEAD_DIM)
    page = tl.where(slot >= 0, slot, 0) // PAGE_SIZE
    off = tl.where(slot >= 0, slot, 0) % PAGE_SIZE
    k = tl.load(k_ptr + t * stride_kt + h[:, None] * stride_kh + d[None, :], mask=mask)
    v = tl.load(v_ptr + t * stride_vt + h[:, None] * stride_vh + d[None, :], mask=mask)
    tl.store(kp_ptr + page * stride_kpp + off * stride_kps + h[:, None] * stride_kph + d[None, :], k, mask=mask)
    tl.store(vp_ptr + page * stride_vpp + off * stride_vps + h[:, None] * stride_vph + d[None, :], v, mask=mask)


@triton.jit
def _quantise_run(src_ptr, stride_t, stride_h, pages_ptr, stride_pp, stride_ps, stride_ph, sc_ptr,
                  tok, in_run, off_i, o_min, page, h, d, dmask,
                  BLOCK_S: tl.constexpr, FP8_MAX: tl.constexpr):
    """Quantise one run of tokens (one page, one KV head) of K or V into the pool, requantising old entries."""
    x = tl.load(src_ptr + tok[:, None] * stride_t + h * stride_h + d[None, :],
                mask=in_run[:, None] & dmask[None, :], other=0.0).to(tl.float32)
    amax = tl.max(tl.max(tl.abs(x), 1), 0)
    old = tl.load(sc_ptr)
    has_old = o_min > 0
    new = tl.maximum(tl.where(has_old, old, 0.0), tl.math.div_rn(amax, amax * 0.0 + FP8_MAX))
    safe = tl.where(new > 0.0, new, 1.0)  # an all-zero page-head keeps scale 0, as torch_ops does
    page_base = pages_ptr + page * stride_pp + h * stride_ph
    # scalar flags combined as integers: triton 3.9's interpreter cannot AND scalar booleans
    grow = has_old.to(tl.int32) * (new > old).to(tl.int32)
    j = tl.arange(0, BLOCK_S)
    jmask = (j[:, None] < o_min * grow) & dmask[None, :]
    y = tl.load(page_base + j[:, None] * stride_ps + d[None, :], mask=jmask, other=0.0).to(tl.float32)
    # IEEE divisions (div_rn), so the GPU rounds exactly like PyTorch's reference
    ratio = tl.math.div_rn(old + tl.zeros_like(y), safe + tl.zeros_like(y))
    y = tl.minimum(tl.maximum(y * ratio, -FP8_MAX), FP8_MAX)
    tl.store(page_base + j[:, None] * stride_ps + d[None, :], round_to_e4m3(y).to(tl.float8e4nv), mask=jmask)
    qx = tl.math.div_rn(x, safe + tl.zeros_like(x))
    qx = tl.minimum(tl.maximum(qx, -FP8_MAX), FP8_MAX)
    tl.store(page_base + off_i[:, None] * stride_ps + d[None, :], round_to_e4m3(qx).to(tl.float8e4nv),
             mask=in_run[:, None] & dmask[None, :])
    tl.store(sc_ptr, new)


@triton.jit(do_not_specialize=["T"])
def _write_fp8_kernel(
    k_ptr, v_ptr, kp_ptr, vp_ptr, ks_ptr, vs_ptr, slot_ptr, T,
    stride_kt, stride_kh, stride_vt, stride_vh,
    stride_kpp, stride_kps, stride_kph, stride_vpp, stride_vps, stride_vph,
    stride_sp, stride_sh,
    HEAD_DIM: tl.constexpr, PAGE_SIZE: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
    FP8_MAX: tl.constexpr,
):
    t = tl.program_id(0)
    h = tl.program_id(1)
    slot_t = tl.load(slot_ptr + t)
    page_t = tl.where(slot_t >= 0, slot_t, 0) // PAGE_SIZE
    prev = tl.load(slot_ptr + t - 1, mask=t > 0, other=-1)
    prev_page = tl.where(prev >= 0, tl.maximum(prev, 0) // PAGE_SIZE, -1)  # C division truncates: keep -1 apart
    leader = (slot_t >= 0).to(tl.int32) * (prev_page != page_t).to(tl.int32)
    if leader != 0:
        i = tl.arange(0, BLOCK_S)
        tok = t + i
        s_i = tl.load(slot_ptr + tok, mask=tok < T, other=-1)
        s_pos = tl.where(s_i >= 0, s_i, 0)
        same = (s_i >= 0) & (s_pos // PAGE_SIZE == page_t) & (i < PAGE_SIZE)
        run_len = tl.min(tl.where(same, BLOCK_S, i), 0)
        in_run = i < run_len
        off_i = s_pos % PAGE_SIZE
        o_min = tl.min(tl.where(in_run, off_i, PAGE_SIZE), 0)
        d = tl.arange(0, BLOCK_D)
        dmask = d < HEAD_DIM
        page64 = page_t.to(tl.int64)
        _quantise_run(k_ptr, stride_kt, stride_kh, kp_ptr, stride_kpp, stride_kps, stride_kph,
                      ks_ptr + page64 * stride_sp + h * stride_sh, tok, in_run, off_i, o_min, page64,
                      h, d, dmask, BLOCK_S, FP8_MAX)
        _quantise_run(v_ptr, stride_vt, stride_vh, vp_ptr, stride_vpp, stride_vps, stride_vph,
                      vs_ptr + page64 * stride_sp + h * stride_sh, tok, in_run, off_i, o_min, page64,
                      h, d, dmask, BLOCK_S, FP8_MAX)


def write_kv_impl(k: torch.Tensor, v: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
                  k_scales: torch.Tensor | None, v_scales: torch.Tensor | None, slot_mapping: torch.Tensor) -> None:
    """Launcher behind ``triton_ops.write_kv``; negative slots (padding) are skipped."""
    check_device(k, v, k_pages, v_pages, k_scales, v_scales, slot_mapping)
    T, Hkv, D = k.shape
    num_pages, page_size, Hp, Dp = k_pages.shape
    if v.shape != k.shape or (Hp, Dp) != (Hkv, D) or v_pages.shape != k_pages.shape:
        raise ValueError(f"write_kv: k {tuple(k.shape)} / v {tuple(v.shape)} do not fit pages {tuple(k_pages.shape)}")
    if slot_mapping.shape != (T,):
        raise ValueError(f"write_kv: slot_mapping must be [{T}], got {tuple(slot_mapping.shape)}")
    if T == 0:
        return
    if k.stride(2) != 1:
        k = k.contiguous()
    if v.stride(2) != 1:
        v = v.contiguous()
    if k_pages.stride(3) != 1 or v_pages.stride(3) != 1:
        raise ValueError("write_kv: pages must be contiguous in head_dim")
    slot_mapping = slot_mapping.to(torch.int64)
    BLOCK_D = triton.next_power_of_2(D)
    if k_pages.dtype != torch.float8_e4m3fn:
        _scatter_kernel[(T,)](
            k, v, k_pages, v_pages, slot_mapping,
            k.stride(0), k.stride(1), v.stride(0), v.stride(1),
            k_pages.stride(0), k_pages.stride(1), k_pages.stride(2),
            v_pages.stride(0), v_pages.stride(1), v_pages.stride(2),
            NUM_KV_HEADS=Hkv, HEAD_DIM=D, PAGE_SIZE=page_size,
            BLOCK_H=triton.next_power_of_2(Hkv), BLOCK_D=BLOCK_D,
        )
        return
    if k_scales is None or v_scales is None:
        raise ValueError("write_kv: fp8 pages need k_scales and v_scales")
    if k_scales.shape != (num_pages, Hkv) or k_scales.dtype != torch.float32 or v_scales.stride() != k_scales.stride():
        raise ValueError(f"write_kv: scales must be float32 [{num_pages}, {Hkv}] with equal strides")
    _write_fp8_kernel[(T, Hkv)](
        k, v, k_pages, v_pages, k_scales, v_scales, slot_mapping, T,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_pages.stride(0), k_pages.stride(1), k_pages.stride(2),
        v_pages.stride(0), v_pages.stride(1), v_pages.stride(2),
        k_scales.stride(0), k_scales.stride(1),
        HEAD_DIM=D, PAGE_SIZE=page_size, BLOCK_S=triton.next_power_of_2(page_size), BLOCK_D=BLOCK_D,
        FP8_MAX=FP8_E4M3_MAX,
    )
