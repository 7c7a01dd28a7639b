"""INT4 weight-only matmul in Triton: ``y = x @ dequant(W).T`` reading the engine's packed layout directly.

Layout (docs/CONTRACTS.md, ``reference_engine.quant.Int4Weight``): ``qweight`` uint8 ``[N, K // 2]``, element ``2j`` in
the low nibble and ``2j + 1`` in the high nibble; symmetric nibbles hold ``q + 8`` (w = (nibble - 8) * s), asymmetric
ones hold ``q`` with ``zeros [N, K // G]`` (w = (nibble - zero) * s); ``scales [N, K // G]``.

Why two kernels: batch-1 decode is a GEMV and purely bandwidth-bound, so it avoids ``tl.dot`` (whose 16-row minimum
would waste 15/16 of the tensor-core work) and reduces with plain multiply-adds.  Batched decode (M >= 2) uses a
small-M GEMM on tensor cores.  Neither kernel interleaves the two nibbles back into K order: the activations are read
as even and odd columns instead, which is free (x is tiny and cached) and keeps the weight loads contiguous.  When the
group spans a whole K block, the scale (and zero) is applied once per output and block rather than per weight.

Split-K: decode matrices are often too small to occupy the GPU with one program per output block (Qwen2.5-0.5B's
o_proj has 896 outputs), so K is cut into slices; each slice writes an fp32 partial and the last slice of a tile to
finish (an atomic arrival counter) sums them and writes the output, all in the same launch.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from reference_engine.kernels.triton_common import check_device, dot_in_fp32, sm_count


@triton.jit
def _split_k_epilogue(acc, part_ptr, lock_ptr, out_ptr, offs, mask, pid_k, num_splits, stride_split):
    """Store this slice's fp32 partial; the last slice to arrive (atomic counter) sums all of them into ``out``.

    Fusing the reduction this way saves a kernel launch per projection, which matters at batch 1 where a decode step
    is a long chain of microsecond-sized kernels.  The counter resets itself, so the buffer stays valid across calls
    and inside CUDA graphs.
    """
    tl.store(part_ptr + pid_k * stride_split + offs, acc, mask=mask)
    # every thread's partial store happens-before the counter's release (barrier + cumulative acq_rel atomic)
    tl.debug_barrier()
    arrived = tl.atomic_add(lock_ptr, 1, sem="acq_rel")
    if arrived == num_splits - 1:
        total = tl.zeros_like(acc)
        for sp in range(0, num_splits):
            total += tl.load(part_ptr + sp * stride_split + offs, mask=mask, other=0.0, cache_modifier=".cg")
        tl.store(out_ptr + offs, total, mask=mask)
        tl.atomic_xchg(lock_ptr, 0)


@triton.jit(do_not_specialize=["N", "K", "k_per_split", "num_splits"])
def _int4_gemv_kernel(
    x_ptr, qw_ptr, s_ptr, z_ptr, out_ptr, part_ptr, lock_ptr, N, K, k_per_split, num_splits,
    stride_qn, stride_sn, stride_zn, stride_osplit,
    GROUP: tl.constexpr, HAS_ZEROS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SCALE_PER_BLOCK: tl.constexpr, SPLIT: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = n < N
    n64 = n.to(tl.int64)
    j = tl.arange(0, BLOCK_K // 2)
    k_start = pid_k * k_per_split
    k_end = tl.minimum(K, k_start + k_per_split)
    # 2-D accumulator, reduced across K once at the end: no cross-thread reduction inside the loop
    acc2 = tl.zeros([BLOCK_N, BLOCK_K // 2], tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        kb = k0 // 2 + j
        kmask = 2 * kb < k_end
        wmask = nmask[:, None] & kmask[None, :]
        p = tl.load(qw_ptr + n64[:, None] * stride_qn + kb[None, :], mask=wmask, other=0).to(tl.int32)
        lo = (p & 15).to(tl.float32)
        hi = (p >> 4).to(tl.float32)
        xe = tl.load(x_ptr + 2 * kb, mask=kmask, other=0.0).to(tl.float32)
        xo = tl.load(x_ptr + 2 * kb + 1, mask=kmask, other=0.0).to(tl.float32)
        if SCALE_PER_BLOCK:
            g = k0 // GROUP
            s = tl.load(s_ptr + n64 * stride_sn + g, mask=nmask, other=0.0).to(tl.float32)[:, None]
            if HAS_ZEROS:
                z = tl.load(z_ptr + n64 * stride_zn + g, mask=nmask, other=0).to(tl.float32)[:, None]
            else:
                z = 8.0
        else:
            g = (2 * kb) // GROUP
            s = tl.load(s_ptr + n64[:, None] * stride_sn + g[None, :], mask=wmask, other=0.0).to(tl.float32)
            if HAS_ZEROS:
                z = tl.load(z_ptr + n64[:, None] * stride_zn + g[None, :], mask=wmask, other=0).to(tl.float32)
            else:
                z = 8.0
        acc2 += s * ((lo - z) * xe[None, :] + (hi - z) * xo[None, :])
    acc = tl.sum(acc2, 1)
    if SPLIT:
        _split_k_epilogue(acc, part_ptr, lock_ptr + pid_n, out_ptr, n, nmask, pid_k, num_splits, stride_osplit)
    else:
        tl.store(out_ptr + n, acc, mask=nmask)


@triton.jit(do_not_specialize=["M", "N", "K", "k_per_split", "num_splits"])
def _int4_gemm_kernel(
    x_ptr, qw_ptr, s_ptr, z_ptr, out_ptr, part_ptr, lock_ptr, M, N, K, k_per_split, num_splits,
    stride_xm, stride_qn, stride_sn, stride_zn, stride_osplit, stride_om,
    GROUP: tl.constexpr, HAS_ZEROS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, SCALE_PER_BLOCK: tl.constexpr, DOT_FP32: tl.constexpr, SPLIT: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mmask = m < M
    nmask = n < N
    n64 = n.to(tl.int64)
    m64 = m.to(tl.int64)
    j = tl.arange(0, BLOCK_K // 2)
    k_start = pid_k * k_per_split
    k_end = tl.minimum(K, k_start + k_per_split)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        kb = k0 // 2 + j
        kmask = 2 * kb < k_end
        wmask = kmask[:, None] & nmask[None, :]
        p = tl.load(qw_ptr + n64[None, :] * stride_qn + kb[:, None], mask=wmask, other=0).to(tl.int32)
        lo = (p & 15).to(tl.float32)  # [BLOCK_K // 2, BLOCK_N]
        hi = (p >> 4).to(tl.float32)
        xmask = mmask[:, None] & kmask[None, :]
        xe = tl.load(x_ptr + m64[:, None] * stride_xm + 2 * kb[None, :], mask=xmask, other=0.0)
        xo = tl.load(x_ptr + m64[:, None] * stride_xm + 2 * kb[None, :] + 1, mask=xmask, other=0.0)
        if SCALE_PER_BLOCK:
            g = k0 // GROUP
            s = tl.load(s_ptr + n64 * stride_sn + g, mask=nmask, other=0.0).to(tl.float32)
            if HAS_ZEROS:
                z = tl.load(z_ptr + n64 * stride_zn + g, mask=nmask, other=0).to(tl.float32)[None, :]
            else:
                z = 8.0
            wl = lo - z  # small integers: exact in bf16/fp16, so the scale can wait until after the dot
            wh = hi - z
        else:
            g = (2 * kb) // GROUP
            sg = tl.load(s_ptr + n64[None, :] * stride_sn + g[:, None], mask=wmask, other=0.0).to(tl.float32)
            if HAS_ZEROS:
                z = tl.load(z_ptr + n64[None, :] * stride_zn + g[:, None], mask=wmask, other=0).to(tl.float32)
            else:
                z = 8.0
            wl = (lo - z) * sg
            wh = (hi - z) * sg
        if DOT_FP32:
            part = tl.dot(xe.to(tl.float32), wl) + tl.dot(xo.to(tl.float32), wh)
        else:
            part = tl.dot(xe, wl.to(xe.dtype)) + tl.dot(xo, wh.to(xo.dtype))
        if SCALE_PER_BLOCK:
            acc += part * s[None, :]
        else:
            acc += part
    offs = m64[:, None] * stride_om + n[None, :]
    omask = mmask[:, None] & nmask[None, :]
    if SPLIT:
        lock = lock_ptr + pid_m * tl.num_programs(1) + pid_n
        _split_k_epilogue(acc, part_ptr, lock, out_ptr, offs, omask, pid_k, num_splits, stride_osplit)
    else:
        tl.store(out_ptr + offs, acc, mask=omask)


_LOCKS: dict[torch.device, torch.Tensor] = {}


def _locks(device: torch.device, n: int) -> torch.Tensor:
    """Zeroed arrival counters for the fused split-K epilogue, one per output tile, kept per device and reused
    (each kernel leaves them at zero).  Grown only outside CUDA-graph capture in practice: warm-up calls come first."""
    buf = _LOCKS.get(device)
    if buf is None or buf.numel() < n:
        buf = torch.zeros(max(n, 4096), dtype=torch.int32, device=device)
        _LOCKS[device] = buf
    return buf


def _block_k(group_size: int, K: int, default: int) -> tuple[int, bool]:
    """K block and whether one scale covers it (group a multiple of the block, or a power-of-two group >= 32)."""
    if group_size % default == 0:
        return default, True
    if group_size < default and group_size >= 32 and group_size & (group_size - 1) == 0:
        return group_size, True
    return min(default, max(32, triton.next_power_of_2(K))), False


def _split_k(programs: int, K: int, block_k: int, device: torch.device) -> int:
    """Slices of K so that about four programs per SM run; 1 when the output alone fills the GPU."""
    want = triton.cdiv(4 * sm_count(device), max(1, programs))
    return max(1, min(want, triton.cdiv(K, block_k)))


def int4_linear_impl(
    x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None, group_size: int,
    *, split_k: int | None = None, block_n: int | None = None, block_k: int | None = None,
    force_gemm: bool = False, num_warps: int | None = None, num_stages: int | None = None,
) -> torch.Tensor:
    """Launcher behind ``triton_ops.int4_linear``: ``x [M, K] -> [M, N]`` in x's dtype; knobs for tests/benchmarks."""
    check_device(x, qweight, scales, zeros)
    if x.dim() != 2:
        raise ValueError(f"int4_linear: x must be [M, K], got {tuple(x.shape)}")
    M, K = x.shape
    N, KH = qweight.shape
    if qweight.dtype != torch.uint8 or 2 * KH != K:
        raise ValueError(f"int4_linear: qweight must be uint8 [N, {K // 2}] for K={K}, got {qweight.dtype} "
                         f"{tuple(qweight.shape)}")
    if group_size <= 0 or group_size % 2 or K % group_size:
        raise ValueError(f"int4_linear: group_size {group_size} must be even and divide K={K}")
    if scales.shape != (N, K // group_size) or (zeros is not None and zeros.shape != scales.shape):
        raise ValueError(f"int4_linear: scales/zeros must be [{N}, {K // group_size}], got {tuple(scales.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    if qweight.stride(1) != 1 or scales.stride(1) != 1 or (zeros is not None and zeros.stride(1) != 1):
        raise ValueError("int4_linear: qweight/scales/zeros must be contiguous along K")
    out = torch.empty(M, N, dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return out
    has_zeros = zeros is not None
    z = zeros if has_zeros else scales
    szn = zeros.stride(0) if zeros is not None else 0
    gemv = M == 1 and not force_gemm
    if gemv:
        BLOCK_N = block_n or 32
        BLOCK_K, per_block = _block_k(group_size, K, block_k or 128)
        grid_mn = triton.cdiv(N, BLOCK_N)
    else:
        BLOCK_M = 16 if M <= 16 else 32
        BLOCK_N = block_n or 64
        BLOCK_K, per_block = _block_k(group_size, K, block_k or 64)
        grid_mn = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    if block_k is not None and not per_block and block_k < BLOCK_K:
        BLOCK_K = block_k
    splits = split_k or _split_k(grid_mn, K, BLOCK_K, x.device)
    k_per_split = triton.cdiv(triton.cdiv(K, splits), BLOCK_K) * BLOCK_K
    splits = triton.cdiv(K, k_per_split)
    split = splits > 1
    launch = {k: v for k, v in (("num_warps", num_warps), ("num_stages", num_stages)) if v is not None}
    part = torch.empty(splits, M, N, dtype=torch.float32, device=x.device) if split else out
    stride_split = part.stride(0) if split else 0
    if gemv:
        grid: tuple[int, ...] = (triton.cdiv(N, BLOCK_N), splits)
        locks = _locks(x.device, grid[0]) if split else out
        _int4_gemv_kernel[grid](
            x, qweight, scales, z, out, part, locks, N, K, k_per_split, splits,
            qweight.stride(0), scales.stride(0), szn, stride_split,
            GROUP=group_size, HAS_ZEROS=has_zeros, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, SCALE_PER_BLOCK=per_block,
            SPLIT=split, **launch,
        )
    else:
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N), splits)
        locks = _locks(x.device, grid[0] * grid[1]) if split else out
        _int4_gemm_kernel[grid](
            x, qweight, scales, z, out, part, locks, M, N, K, k_per_split, splits,
            x.stride(0), qweight.stride(0), scales.stride(0), szn, stride_split, N,
            GROUP=group_size, HAS_ZEROS=has_zeros, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
            SCALE_PER_BLOCK=per_block, DOT_FP32=dot_in_fp32(x), SPLIT=split, **launch,
        )
    return out
