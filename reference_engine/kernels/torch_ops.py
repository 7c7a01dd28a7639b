"""PyTorch implementations of the engine's kernel ops (the CPU path, and the reference the Triton kernels match).

Signatures and tensor layouts are fixed by docs/CONTRACTS.md ("KV page format", "Kernel ops").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from reference_engine.quant import Int4Weight, dequantize_int4

FP8_MAX = 448.0  # largest finite float8_e4m3fn


def check_tags(page_tags: torch.Tensor, block_tables: torch.Tensor, expected_tags: torch.Tensor) -> torch.Tensor:
    """[B] bool: does any page a row points at carry a tag other than the one that row expects? (-1 = unused slot)."""
    valid = block_tables >= 0
    actual = page_tags[block_tables.clamp(min=0).long()]
    return ((actual != expected_tags) & valid).any(dim=1)


def gather_kv(
    pages: torch.Tensor, scales: torch.Tensor | None, block_table: torch.Tensor, n_tokens: int, dtype: torch.dtype
) -> torch.Tensor:
    """The first n_tokens of one sequence's K or V, dequantised: [n_tokens, num_kv_heads, head_dim]."""
    idx = block_table.long()
    x = pages.index_select(0, idx)                           # [P, page, KVH, D] (index_select: see read_pages)
    if scales is not None:
        x = dequantize(x, scales.index_select(0, idx), dtype)
    else:
        x = x.to(dtype)
    return x.reshape(-1, x.shape[-2], x.shape[-1])[:n_tokens]


@dataclass
class DecodePlan:
    """What every layer of one decode step needs besides its own K/V pages, computed once per step (the page tags and
    block tables are the same for all layers): gather indices and the mask of positions a row may not see."""

    page_idx: torch.Tensor                   # [B * P] int64, -1 padding clamped to page 0 (masked out by `hidden`)
    hidden: torch.Tensor                     # [B, 1, 1, L] bool: past the row's length, or the row's tags mismatch
    mismatch: torch.Tensor                   # [B] bool
    any_mismatch: bool
    last: torch.Tensor                       # [B] int64: seq_len - 1, each row's current position (dense_kv.py)
    tail_page: torch.Tensor                  # [B] int64: the page holding each row's current token
    tail_pos: torch.Tensor                   # [B, page] int64: that page's positions in the row


def decode_plan(block_tables: torch.Tensor, seq_lens: torch.Tensor, page_size: int,
                mismatch: torch.Tensor) -> DecodePlan:
    idx = block_tables.clamp(min=0).long()
    pos = torch.arange(idx.shape[1] * page_size, device=idx.device)
    lens = seq_lens.to(pos.dtype)
    hidden = (pos[None, :] >= lens[:, None]) | mismatch[:, None]
    rows = torch.arange(idx.shape[0], device=idx.device)
    last = lens - 1
    tail = last // page_size
    return DecodePlan(idx.reshape(-1), hidden[:, None, None, :], mismatch, bool(mismatch.any()), last,
                      idx[rows, tail], tail[:, None] * page_size + pos[None, :page_size])


def dequantize(pages: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """FP8 K or V of gathered pages [N, page, KVH, D] with their scales [N, KVH], in ``dtype``: the one formula
    every reader uses (page gather, dense buffers), so they all see the same values."""
    return pages.to(dtype) * scales[:, None, :, None].to(dtype)


def read_pages(k_pages: torch.Tensor, v_pages: torch.Tensor, k_scales: torch.Tensor | None,
               v_scales: torch.Tensor | None, page_idx: torch.Tensor,
               dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The pages ``page_idx`` of K and V as decode attention reads them: [N, page, KVH, D] in ``dtype``
    (dequantised for FP8 pools, whose two scale tensors always come together). The page gather and the dense
    per-batch buffers (dense_kv.py) both read through here, so they see the same values."""
    k = k_pages.index_select(0, page_idx)  # index_select, not k_pages[idx]: the same copy, 4-6x faster on CPU
    v = v_pages.index_select(0, page_idx)
    if k_scales is not None and v_scales is not None:
        return (dequantize(k, k_scales.index_select(0, page_idx), dtype),
                dequantize(v, v_scales.index_select(0, page_idx), dtype))
    return k.to(dtype), v.to(dtype)


def paged_decode_attention(
    q: torch.Tensor,
    k_pages: torch.Tensor,
    v_pages: torch.Tensor,
    k_scales: torch.Tensor | None,
    v_scales: torch.Tensor | None,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    page_tags: torch.Tensor | None,
    expected_tags: torch.Tensor | None,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One query token per sequence against its paged K/V. Rows whose tags mismatch get zeros (never read data)."""
    if page_tags is not None and expected_tags is not None:
        mismatch = check_tags(page_tags, block_tables, expected_tags)
    else:
        mismatch = torch.zeros(q.shape[0], dtype=torch.bool, device=q.device)
    plan = decode_plan(block_tables, seq_lens, k_pages.shape[1], mismatch)
    return planned_decode_attention(q, k_pages, v_pages, k_scales, v_scales, plan, scale), mismatch


def planned_decode_attention(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
                             k_scales: torch.Tensor | None, v_scales: torch.Tensor | None, plan: DecodePlan,
                             scale: float) -> torch.Tensor:
    """`paged_decode_attention` for one layer, given the step's plan (the CPU decode path calls this per layer)."""
    b, h, d = q.shape
    kvh = k_pages.shape[2]
    k, v = read_pages(k_pages, v_pages, k_scales, v_scales, plan.page_idx, q.dtype)   # [B * P, page, KVH, D]
    # [B, KVH, D, L], copied into the dense buffers' layout: a transposed view takes another matmul kernel, whose
    # rounding differs, and a row must get the same bits alone (this path) as in a batch (dense_kv.py)
    k = k.reshape(b, -1, kvh, d).permute(0, 2, 3, 1).contiguous()
    v = v.reshape(b, -1, kvh, d).transpose(1, 2)              # [B, KVH, L, D]
    return grouped_decode_attention(q, k, v, plan, scale)


def grouped_decode_attention(q: torch.Tensor, k_t: torch.Tensor, v: torch.Tensor, plan: DecodePlan,
                             scale: float) -> torch.Tensor:
    """One query token per sequence against gathered K (transposed, [B, KVH, D, L]) and V ([B, KVH, L, D]).

    Shared by the page gather above and the dense per-batch K/V (``reference_engine/dense_kv.py``), so both paths
    compute the same ops in the same order (their outputs are compared bit for bit). Grouped-query attention without
    expanding K/V: the G query heads of a KV head share one matmul. Rows whose tags mismatch get zeros.
    """
    b, h, d = q.shape
    kvh = k_t.shape[1]
    scores = torch.matmul(q.reshape(b, kvh, h // kvh, d), k_t).mul_(scale)  # [B, KVH, G, L]
    if scores.dtype != torch.float32:
        scores = scores.float()
    scores.masked_fill_(plan.hidden, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if probs.dtype != v.dtype:
        probs = probs.to(v.dtype)
    out = torch.matmul(probs, v).reshape(b, h, d)
    if plan.any_mismatch:
        out = out.masked_fill(plan.mismatch[:, None, None], 0.0)
    return out


def write_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_pages: torch.Tensor,
    v_pages: torch.Tensor,
    k_scales: torch.Tensor | None,
    v_scales: torch.Tensor | None,
    slot_mapping: torch.Tensor,
    pages_distinct: bool = False,
) -> None:
    """Store T tokens' K/V at their slots; for fp8 pools quantise with per-page-per-head scales.

    ``pages_distinct``: the caller knows no two of the T tokens fall in one page (a decode step: one token per
    sequence, each in its own current page), so the FP8 path skips grouping tokens by page (same result)."""
    slots = slot_mapping.long()
    if k_scales is None or v_scales is None:  # BF16 pages (FP8 ones always come with both scale tensors)
        if k_pages.is_contiguous() and v_pages.is_contiguous():
            # pages viewed as one row per slot: a plain row copy, the per-layer hot path of every decode step
            k_pages.view(-1, *k_pages.shape[2:]).index_copy_(0, slots, k.to(k_pages.dtype))
            v_pages.view(-1, *v_pages.shape[2:]).index_copy_(0, slots, v.to(v_pages.dtype))
            return
        page_size = k_pages.shape[1]
        k_pages[slots // page_size, slots % page_size] = k.to(k_pages.dtype)
        v_pages[slots // page_size, slots % page_size] = v.to(v_pages.dtype)
        return
    _write_fp8(k, v, k_pages, v_pages, k_scales, v_scales, slots, pages_distinct)


def _write_fp8(k: torch.Tensor, v: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
               k_scales: torch.Tensor, v_scales: torch.Tensor, slots: torch.Tensor, pages_distinct: bool) -> None:
    """Per (page, head): scale = amax / 448; a page whose K or V scale grows in any head is requantised to its new
    scales (a ratio of exactly 1 leaves the other heads' bytes as they were; pages that did not grow are not read).

    A freshly assigned page has scale 0 (the block manager resets it), so stale bytes from the previous owner are
    multiplied by 0 and never leak into the new scale. K and V go through each step together, stacked (``[2, ...]``):
    the decode hot path is some twenty small ops on a few hundred values, so their count, not their size, is the
    cost (half as many as quantising K and V one after the other). With ``pages_distinct`` (decode) each token is
    its own page's group, so the grouping (a sort, a scatter, a re-expansion: a quarter of the ops) is skipped.
    """
    page_size, kvh = k_pages.shape[1], k_pages.shape[2]
    pages = slots // page_size
    x = torch.stack([k, v]).detach()                                       # [2, T, KVH, D]
    amax_tok = x.abs().amax(dim=-1).float()                                # [2, T, KVH]
    inv: torch.Tensor | None = None
    if pages_distinct:
        uniq, new_amax = pages, amax_tok
    else:
        uniq, inv = torch.unique(pages, return_inverse=True)
        new_amax = torch.zeros(2, uniq.numel(), kvh, dtype=torch.float32, device=x.device)
        new_amax.scatter_reduce_(1, inv[None, :, None].expand_as(amax_tok), amax_tok, reduce="amax")
    old_scale = torch.stack([k_scales.index_select(0, uniq), v_scales.index_select(0, uniq)])   # [2, U, KVH]
    new_scale = torch.maximum(old_scale, new_amax / FP8_MAX)
    grown = (new_scale > old_scale).any(dim=2).any(dim=0)                  # [U]: a K or V head of the page grew
    if bool(grown.any()):
        sel = grown.nonzero()[:, 0]
        up, ns, os_ = uniq.index_select(0, sel), new_scale.index_select(1, sel), old_scale.index_select(1, sel)
        ratio = os_ / torch.where(ns > 0, ns, 1.0)   # 1 exactly where a head kept its scale; 0/1 where both are 0
        for i, (pages_t, scales) in enumerate(((k_pages, k_scales), (v_pages, v_scales))):
            requant = (pages_t.index_select(0, up).float() * ratio[i][:, None, :, None]).clamp_(-FP8_MAX, FP8_MAX)
            _bytes(pages_t).index_copy_(0, up, _bytes(requant.to(pages_t.dtype)))
            scales.index_copy_(0, up, ns[i])
    s = new_scale if inv is None else new_scale.index_select(1, inv)      # [2, T, KVH]
    safe = torch.where(s > 0, s, 1.0)
    q = (x.float() / safe[..., None]).clamp_(-FP8_MAX, FP8_MAX).to(k_pages.dtype)
    for i, pages_t in enumerate((k_pages, v_pages)):
        if pages_t.is_contiguous():
            _bytes(pages_t).view(-1, *pages_t.shape[2:]).index_copy_(0, slots, _bytes(q[i]))
        else:
            pages_t[pages, slots % page_size] = q[i]


def _bytes(x: torch.Tensor) -> torch.Tensor:
    """An FP8 tensor's bytes as uint8, the same memory: index_copy_ has no float8 kernel on CPU."""
    return x.view(torch.uint8)


def int4_linear(x: torch.Tensor, packed: Int4Weight) -> torch.Tensor:
    """x [M, K] @ W^T for an INT4 weight. Uses aten's CPU int4pack kernel when present (bf16 activations, which is
    where that kernel is fast), else dequantises on the fly (pure torch fallback)."""
    if x.device.type == "cpu" and _cpu_int4_available():
        pack = packed.cache.get("aten_cpu")
        if pack is None:
            pack = _aten_cpu_pack(packed)
            packed.cache["aten_cpu"] = pack
        w_packed, scale_zeros = pack
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(x.to(torch.bfloat16), w_packed, packed.group_size, scale_zeros)
        return y.to(x.dtype)
    w = packed.cache.get("dequant")
    if w is None or w.dtype != x.dtype or w.device != x.device:
        w = dequantize_int4(packed, x.dtype).to(x.device)
        if x.device.type != "cpu":
            packed.cache["dequant"] = w
    return x @ w.t()


def _cpu_int4_available() -> bool:
    return hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu") and hasattr(
        torch.ops.aten, "_convert_weight_to_int4pack_for_cpu"
    )


def _aten_cpu_pack(p: Int4Weight) -> tuple[torch.Tensor, torch.Tensor]:
    """aten computes w = (nibble - 8) * scale + zero_f; our asymmetric form (nibble - z) * s maps to
    zero_f = (8 - z) * s."""
    from reference_engine.quant import unpack_nibbles

    nib = unpack_nibbles(p.qweight).to(torch.int32).contiguous()
    w_packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(nib, 2)
    s = p.scales.float()
    z = torch.zeros_like(s) if p.zeros is None else (8 - p.zeros.float()) * s
    scale_zeros = torch.stack([s.t(), z.t()], dim=-1).contiguous().to(torch.bfloat16)   # [K/G, N, 2]
    return w_packed, scale_zeros
