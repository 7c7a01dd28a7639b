"""Paged decode attention in Triton, with the KV page-tag check fused into the same pass.

Why one kernel does both: the integrity check (every page a sequence reads still carries the tag the sequence expects)
must cost well under 1% of a decode step.  A separate pass would re-read the block table and launch another kernel;
here the programs of KV head 0 compare the tags of exactly the pages they are about to read, so the check adds two
small cached loads per block and nothing else.

Layout (docs/CONTRACTS.md): pages ``[num_pages, page_size, num_kv_heads, head_dim]`` in bf16/fp16/fp32 or
float8_e4m3fn with float32 per-page-per-head scales ``[num_pages, num_kv_heads]``; ``block_tables [B, max_pages]``
int32 (-1 padded); ``expected_tags [B, max_pages]`` int64; ``page_tags [num_pages]`` int64; ``seq_lens [B]`` int32.

Work split (flash-decoding): grid ``(B, num_kv_heads, num_splits)``.  One program serves all query heads of one KV
head (GQA: each K/V tile is loaded once for the whole group) over one contiguous slice of the sequence.  With one
split it writes the normalised output directly; with several it writes un-normalised partials plus the running max
and sum, and a small reduce kernel combines them (and ORs the per-split tag flags into the per-sequence result).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from reference_engine.kernels.triton_common import check_device, dot_in_fp32, sm_count

_LOG2E = 1.4426950408889634


@triton.jit(do_not_specialize=["num_pages", "max_pages", "tokens_per_split", "num_splits"])
def _paged_decode_kernel(
    q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, bt_ptr, sl_ptr, tags_ptr, etags_ptr,
    out_ptr, m_ptr, l_ptr, flag_ptr,
    qk_scale, num_pages, max_pages, tokens_per_split, num_splits,
    stride_qb, stride_qh,
    stride_kp, stride_ks, stride_kh,
    stride_vp, stride_vs, stride_vh,
    stride_sp, stride_sh,
    stride_btb, stride_etb,
    stride_ob, stride_oh, stride_osplit,
    stride_mb, stride_mh,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, PAGE_SIZE: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
    IS_FP8: tl.constexpr, SPLIT: tl.constexpr, CHECK_TAGS: tl.constexpr, DOT_FP32: tl.constexpr,
):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)

    seq_len = tl.load(sl_ptr + b)
    start = split * tokens_per_split
    end = tl.minimum(seq_len, start + tokens_per_split)
    is_head0 = kvh == 0

    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, BLOCK_D)
    gmask = g < GROUP
    dmask = d < HEAD_DIM
    heads = kvh * GROUP + g

    q = tl.load(q_ptr + b * stride_qb + heads[:, None] * stride_qh + d[None, :],
                mask=gmask[:, None] & dmask[None, :], other=0.0).to(tl.float32)
    q = q * qk_scale  # softmax scale folded with log2(e): the loop uses exp2
    if DOT_FP32:
        q_dot = q
    else:
        q_dot = q.to(tl.bfloat16)

    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    mismatch = tl.zeros([BLOCK_N], tl.int32)

    for n0 in range(start, end, BLOCK_N):
        t = n0 + tl.arange(0, BLOCK_N)
        tmask = t < end
        slot = t // PAGE_SIZE
        page = tl.load(bt_ptr + b * stride_btb + slot, mask=tmask & (slot < max_pages), other=-1)
        pvalid = (page >= 0) & (page < num_pages)
        if CHECK_TAGS:
            cmask = tmask & ((t * 0 + kvh) == 0)  # vector form: the interpreter cannot AND a vector with a scalar
            tag = tl.load(tags_ptr + page, mask=cmask & pvalid, other=0)
            etag = tl.load(etags_ptr + b * stride_etb + slot, mask=cmask & (slot < max_pages), other=0)
            bad = cmask & ((tag != etag) | (pvalid == 0))
            mismatch = mismatch | bad.to(tl.int32)
        lmask = tmask & pvalid
        page64 = tl.where(pvalid, page, 0).to(tl.int64)
        off = t % PAGE_SIZE

        k_row = page64 * stride_kp + off * stride_ks + kvh * stride_kh
        kT = tl.load(k_ptr + k_row[None, :] + d[:, None], mask=lmask[None, :] & dmask[:, None], other=0.0)
        if DOT_FP32:
            s = tl.dot(q_dot, kT.to(tl.float32))
        else:
            s = tl.dot(q_dot, kT.to(tl.bfloat16))
        if IS_FP8:
            ksc = tl.load(ks_ptr + page64 * stride_sp + kvh * stride_sh, mask=lmask, other=0.0)
            s = s * ksc[None, :]
        s = tl.where(lmask[None, :], s, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)

        v_row = page64 * stride_vp + off * stride_vs + kvh * stride_vh
        v = tl.load(v_ptr + v_row[:, None] + d[None, :], mask=lmask[:, None] & dmask[None, :], other=0.0)
        if IS_FP8:
            vsc = tl.load(vs_ptr + page64 * stride_sp + kvh * stride_sh, mask=lmask, other=0.0)
            p = p * vsc[None, :]
        if DOT_FP32:
            acc = acc * alpha[:, None] + tl.dot(p, v.to(tl.float32))
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v.to(tl.bfloat16))
        m_i = m_new

    flag = tl.max(mismatch, 0)
    omask = gmask[:, None] & dmask[None, :]
    if SPLIT:
        o_ptrs = out_ptr + b * stride_ob + heads[:, None] * stride_oh + split * stride_osplit + d[None, :]
        tl.store(o_ptrs, acc, mask=omask)
        ml = b * stride_mb + heads * stride_mh + split
        tl.store(m_ptr + ml, m_i, mask=gmask)
        tl.store(l_ptr + ml, l_i, mask=gmask)
        tl.store(flag_ptr + b * num_splits + split, flag, mask=is_head0)
    else:
        denom = tl.where(l_i > 0.0, l_i, 1.0)
        o = acc / denom[:, None]
        o_ptrs = out_ptr + b * stride_ob + heads[:, None] * stride_oh + d[None, :]
        tl.store(o_ptrs, o, mask=omask)
        tl.store(flag_ptr + b, flag != 0, mask=is_head0)


@triton.jit(do_not_specialize=["num_splits"])
def _paged_decode_reduce_kernel(
    part_ptr, m_ptr, l_ptr, split_flag_ptr, out_ptr, flag_ptr, num_splits,
    stride_pb, stride_ph, stride_psplit, stride_mb, stride_mh, stride_ob, stride_oh,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    s = tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    smask = s < num_splits
    dmask = d < HEAD_DIM
    m = tl.load(m_ptr + b * stride_mb + h * stride_mh + s, mask=smask, other=float("-inf"))
    l = tl.load(l_ptr + b * stride_mb + h * stride_mh + s, mask=smask, other=0.0)
    m_max = tl.max(m, 0)
    m_safe = tl.where(m_max == float("-inf"), 0.0, m_max)
    w = tl.exp2(m - m_safe)
    part = tl.load(part_ptr + b * stride_pb + h * stride_ph + s[:, None] * stride_psplit + d[None, :],
                   mask=smask[:, None] & dmask[None, :], other=0.0)
    num = tl.sum(part * w[:, None], 0)
    den = tl.sum(l * w, 0)
    den = tl.where(den > 0.0, den, 1.0)
    tl.store(out_ptr + b * stride_ob + h * stride_oh + d, num / den, mask=dmask)
    f = tl.load(split_flag_ptr + b * num_splits + s, mask=smask, other=0)
    tl.store(flag_ptr + b, tl.max(f, 0) != 0, mask=h == 0)


def _pick_splits(batch: int, num_kv_heads: int, max_tokens: int, device: torch.device) -> int:
    """Enough programs to fill the GPU about twice, but never slices shorter than ~128 tokens (reduce cost)."""
    programs = batch * num_kv_heads
    want = triton.cdiv(2 * sm_count(device), programs)
    return max(1, min(want, triton.cdiv(max_tokens, 128)))


def paged_decode_attention_impl(
    q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
    k_scales: torch.Tensor | None, v_scales: torch.Tensor | None,
    block_tables: torch.Tensor, seq_lens: torch.Tensor, page_tags: torch.Tensor | None,
    expected_tags: torch.Tensor | None, scale: float, *, num_splits: int | None = None, check_tags: bool = True,
    block_n: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launcher behind ``triton_ops.paged_decode_attention``; extra knobs are for tests and benchmarks only.

    ``check_tags=False`` exists so the benchmark can measure what the fused tag check costs (the flags then read all
    False); passing ``page_tags``/``expected_tags`` as None does the same, as ``torch_ops`` allows.
    """
    if page_tags is None or expected_tags is None:
        check_tags = False
        page_tags = expected_tags = block_tables  # never read: CHECK_TAGS is off
    check_device(q, k_pages, v_pages, k_scales, v_scales, block_tables, seq_lens, page_tags, expected_tags)
    B, H, D = q.shape
    num_pages, page_size, Hkv, Dk = k_pages.shape
    if Dk != D or v_pages.shape != k_pages.shape:
        raise ValueError(f"paged_decode_attention: q head_dim {D} vs pages {tuple(k_pages.shape)} / "
                         f"{tuple(v_pages.shape)}")
    if H % Hkv != 0:
        raise ValueError(f"paged_decode_attention: num_heads {H} is not a multiple of num_kv_heads {Hkv}")
    is_fp8 = k_pages.dtype == torch.float8_e4m3fn
    if is_fp8:
        if k_scales is None or v_scales is None:
            raise ValueError("paged_decode_attention: fp8 pages need k_scales and v_scales")
        if k_scales.shape != (num_pages, Hkv) or v_scales.stride() != k_scales.stride():
            raise ValueError(f"paged_decode_attention: scales must be [{num_pages}, {Hkv}] with equal strides")
    if k_pages.stride(3) != 1 or v_pages.stride(3) != 1:
        raise ValueError("paged_decode_attention: pages must be contiguous in head_dim")
    q = q.contiguous() if q.stride(2) != 1 else q
    # the kernel indexes these with unit column stride; all are no-ops for the engine's own tensors
    block_tables = block_tables.to(torch.int32).contiguous()
    if check_tags:
        expected_tags = expected_tags.to(torch.int64).contiguous()
        page_tags = page_tags.contiguous()
    seq_lens = seq_lens.to(torch.int32).contiguous()
    if B == 0:
        return torch.empty_like(q), torch.zeros(0, dtype=torch.bool, device=q.device)
    group = H // Hkv
    max_pages = block_tables.shape[1]
    max_tokens = max(1, max_pages * page_size)

    BLOCK_G = max(16, triton.next_power_of_2(group))
    BLOCK_D = max(16, triton.next_power_of_2(D))
    BLOCK_N = block_n or (64 if BLOCK_D <= 128 else 32)
    splits = num_splits or _pick_splits(B, Hkv, max_tokens, q.device)
    tokens_per_split = triton.cdiv(triton.cdiv(max_tokens, splits), BLOCK_N) * BLOCK_N
    splits = triton.cdiv(max_tokens, tokens_per_split)

    out = torch.empty_like(q)
    flags = torch.empty(B, dtype=torch.bool, device=q.device)
    ks = k_scales if is_fp8 else q  # dummy pointer when unused
    vs = v_scales if is_fp8 else q
    sp, sh = (k_scales.stride(0), k_scales.stride(1)) if is_fp8 and k_scales is not None else (0, 0)
    common = dict(
        GROUP=group, HEAD_DIM=D, PAGE_SIZE=page_size, BLOCK_G=BLOCK_G, BLOCK_D=BLOCK_D, BLOCK_N=BLOCK_N,
        IS_FP8=is_fp8, CHECK_TAGS=check_tags, DOT_FP32=dot_in_fp32(q),
    )
    grid = (B, Hkv, splits)
    if splits == 1:
        _paged_decode_kernel[grid](
            q, k_pages, v_pages, ks, vs, block_tables, seq_lens, page_tags, expected_tags,
            out, out, out, flags,
            scale * _LOG2E, num_pages, max_pages, tokens_per_split, 1,
            q.stride(0), q.stride(1),
            k_pages.stride(0), k_pages.stride(1), k_pages.stride(2),
            v_pages.stride(0), v_pages.stride(1), v_pages.stride(2),
            sp, sh, block_tables.stride(0), expected_tags.stride(0),
            out.stride(0), out.stride(1), 0, 0, 0,
            SPLIT=False, **common,
        )
        return out, flags
    part = torch.empty(B, H, splits, D, dtype=torch.float32, device=q.device)
    m = torch.empty(B, H, splits, dtype=torch.float32, device=q.device)
    l = torch.empty_like(m)
    split_flags = torch.empty(B, splits, dtype=torch.int32, device=q.device)
    _paged_decode_kernel[grid](
        q, k_pages, v_pages, ks, vs, block_tables, seq_lens, page_tags, expected_tags,
        part, m, l, split_flags,
        scale * _LOG2E, num_pages, max_pages, tokens_per_split, splits,
        q.stride(0), q.stride(1),
        k_pages.stride(0), k_pages.stride(1), k_pages.stride(2),
        v_pages.stride(0), v_pages.stride(1), v_pages.stride(2),
        sp, sh, block_tables.stride(0), expected_tags.stride(0),
        part.stride(0), part.stride(1), part.stride(2), m.stride(0), m.stride(1),
        SPLIT=True, **common,
    )
    _paged_decode_reduce_kernel[(B, H)](
        part, m, l, split_flags, out, flags, splits,
        part.stride(0), part.stride(1), part.stride(2), m.stride(0), m.stride(1), out.stride(0), out.stride(1),
        HEAD_DIM=D, BLOCK_D=BLOCK_D, BLOCK_S=max(2, triton.next_power_of_2(splits)),
    )
    return out, flags
