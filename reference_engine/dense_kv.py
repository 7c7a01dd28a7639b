"""CPU decode: the running batch's K (transposed) and V, kept dense across steps so a step reads them without a gather.

Why: with paged K/V, every layer of every decode step gathers each sequence's pages and transposes K into the
[head_dim, length] layout the q·Kᵀ matmul reads; at batch 32 that copy was about 40 % of a step (profile of
`benchmarks/engine_decode.py`). While the batch stays the same (between one arrival or finish and the next), step t+1
needs exactly step t's K/V plus one token, so they are kept in dense per-layer buffers and each step writes only its new
token. The paged pool stays the source of truth (prefill, prefix cache, preemption and page-tag checks all read it);
rows new to the batch are read from it (all rows after the engine was idle), and the buffers are exactly as long as
the batch's padded length (re-laid out, held rows copied over, when that changes: see ``DenseKV._resize``).

Same bits as the gather path (`torch_ops.planned_decode_attention`): the buffers hold the values a gather returns
(the pool's dtype, cast to the compute dtype), the matmuls see the same shapes (length = pages x page size, the
positions past a row's length masked the same way) and the same layouts, with only a larger row stride, which BLAS
packs away (checked: tests/engine/test_dense_kv.py runs the same traffic both ways and compares every logprob).
Used for batches of two or more rows (one row's gather is cheap, and its K takes another matmul layout). FP8 pools
too: there a token's write can requantise its page-head (when the page-head's scale grows), so each step reads each
row's current page back whole (page size tokens instead of one; the pages before it are full and never change).
"""

from __future__ import annotations

import torch

from reference_engine.kernels.torch_ops import DecodePlan, grouped_decode_attention, read_pages

ROW_STEP = 8                    # rows grow in steps of this many sequences (length is kept exact: see _resize)


class DenseKV:
    """Per layer: ``k_t`` [rows, KVH, D, cap] and ``v`` [rows, KVH, cap, D] in the compute dtype; row i is the batch's
    i-th sequence. ``max_bytes`` caps the buffers (a batch that would need more takes the gather path)."""

    def __init__(self, num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype, max_bytes: int) -> None:
        self.num_layers, self.kvh, self.head_dim, self.dtype = num_layers, num_kv_heads, head_dim, dtype
        self.max_bytes = max_bytes
        self.k_t: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self.rows = self.cap = 0
        self.key: tuple[object, ...] | None = None     # the batch (sequence ids, in row order) the buffers hold
        self.fresh = False                          # this step refills every layer from the pool
        self.moves: tuple[torch.Tensor, torch.Tensor] | None = None  # this step: rows kept, (new rows, old rows)
        self.fills: torch.Tensor | None = None      # this step: rows new to the batch, read from the pool
        self._pending: tuple[object, ...] | None = None
        self._token_idx: tuple[torch.Tensor, torch.Tensor] | None = None   # this step: where its tokens go (flat)
        self.steps = self.refills = 0               # decode steps that used the buffers, and those that refilled them
        self.carried = 0                            # steps whose batch changed but kept some rows' buffers

    def begin_step(self, key: tuple[object, ...], length: int) -> bool:
        """Prepare for a decode step over the batch ``key`` (one entry per row) whose padded length is ``length``;
        False when the step should take the gather path instead (one row, or too large for ``max_bytes``). Every row's
        sequence grows by exactly one token per decode step and leaves the batch when it stops or is preempted, so an
        unchanged key means the buffers are exactly one token behind."""
        n, held = len(key), self.key
        self.key = None                             # set again by finish_step: a failed or skipped step forces a refill
        self.moves = self.fills = None
        self._token_idx = None
        if n < 2:
            return False
        if (length != self.cap or n > self.rows) and not self._resize(n, length, len(held) if held else 0):
            return False
        self.fresh = held is None or (key != held and not self._carry_over(held, key))
        self._pending = key
        self.steps += 1
        self.refills += self.fresh
        return True

    def _resize(self, n: int, length: int, held_rows: int) -> bool:
        """Buffers for at least ``n`` rows and exactly ``length`` positions; False (and none held) past ``max_bytes``.

        Length is exact (a whole number of pages, as the engine pads it), not rounded up. Why: a step streams every
        layer's weights and K/V, more than the caches hold, so attention reads K/V from memory; a matmul reading
        ``[..., :length]`` of a longer buffer skips a gap after every row, and those gapped reads ran at about half the
        speed of one contiguous read on a 2-core development machine. Exact buffers made the engine 1.13x as fast at
        concurrency 32 with FP32 K/V, 1.08x with FP8 (``benchmarks/engine_ab.py`` against the tree before, same tokens).
        So the buffers are re-laid out whenever the batch's padded length changes: once per page as it grows, and when
        the longest sequence leaves. Rows are rounded up to ROW_STEP (reading the first rows of a buffer leaves no
        gap), and the ``held_rows`` rows the buffers hold are copied across, so the batch's own rows stay valid (no
        refill from the pool); a refill reads (for FP8: dequantises) every row's pages in every layer.
        """
        cap = length
        elem = torch.empty((), dtype=self.dtype).element_size()
        per_row = 2 * self.num_layers * self.kvh * self.head_dim * cap * elem
        rows = max(n, self.rows)
        rounded = -(-rows // ROW_STEP) * ROW_STEP
        if rounded * per_row <= self.max_bytes:
            rows = rounded
        elif rows * per_row > self.max_bytes:       # too large even unrounded: this batch takes the page gather
            self.release()
            return False
        # zeros, not empty: positions past a row's length are masked, but must hold finite values (0 * NaN = NaN)
        k_t = [torch.zeros(rows, self.kvh, self.head_dim, cap, dtype=self.dtype) for _ in range(self.num_layers)]
        v = [torch.zeros(rows, self.kvh, cap, self.head_dim, dtype=self.dtype) for _ in range(self.num_layers)]
        keep, upto = held_rows, min(cap, self.cap)  # a held batch always fits the buffers that hold it
        if keep:
            for new_k, new_v, old_k, old_v in zip(k_t, v, self.k_t, self.v):
                new_k[:keep, ..., :upto].copy_(old_k[:keep, ..., :upto])
                new_v[:keep, :, :upto].copy_(old_v[:keep, :, :upto])
        self.k_t, self.v, self.rows, self.cap = k_t, v, rows, cap
        return True

    def _carry_over(self, old: tuple[object, ...], new: tuple[object, ...]) -> bool:
        """When the batch changed (a request arrived or left), plan to keep the rows of the sequences that stay (moved
        to their new row if it differs: they are exactly one token behind, as for an unchanged batch) and to read
        only the new ones from the pool. Why: requests come and go every few steps in a busy server, and a refill
        reads (and for FP8 dequantises) every row's pages in every layer. False when no row stays."""
        where = {kk: i for i, kk in enumerate(old)}
        src = [where.get(kk, -1) for kk in new]
        kept = [(i, j) for i, j in enumerate(src) if j >= 0]
        if not kept:
            return False
        moved = [(i, j) for i, j in kept if i != j]
        if moved:
            self.moves = (torch.tensor([i for i, _ in moved]), torch.tensor([j for _, j in moved]))
        fills = [i for i, j in enumerate(src) if j < 0]
        self.fills = torch.tensor(fills) if fills else None
        self.carried += 1
        return True

    def finish_step(self) -> None:
        self.key = self._pending

    def forget_batch(self) -> None:
        """The engine ran out of work: no batch is held any more (the next step refills), the buffers are kept for
        it. Why kept: freeing them on every idle moment (a client between two requests) cost a fresh allocation and
        zeroing per burst; now a burst whose padded length matches reuses them, and one whose length differs gets
        them re-laid out (``_resize``). The engine frees them once it has been idle a while (``release``)."""
        self.key = None

    def release(self) -> None:
        """Free the buffers (the engine has been idle a while, or the batch outgrew ``max_bytes``)."""
        self.k_t, self.v = [], []
        self.rows = self.cap = 0
        self.key = None

    def attention(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_pages: torch.Tensor,
                  v_pages: torch.Tensor, plan: DecodePlan, scale: float, k_scales: torch.Tensor | None = None,
                  v_scales: torch.Tensor | None = None) -> torch.Tensor:
        """One layer's decode attention. ``k``/``v`` [B, KVH, D]: this step's token, already written to the pool;
        ``k_scales``/``v_scales``: the pool's FP8 scales (None for other pools)."""
        b, h, d = q.shape
        kvh = self.kvh
        length = plan.hidden.shape[-1]
        k_t, vb = self.k_t[layer][:b], self.v[layer][:b]
        if self.fresh:
            kg, vg = read_pages(k_pages, v_pages, k_scales, v_scales, plan.page_idx, q.dtype)
            k_t[..., :length].copy_(kg.view(b, length, kvh, d).permute(0, 2, 3, 1))
            vb[:, :, :length].copy_(vg.view(b, length, kvh, d).transpose(1, 2))
            return grouped_decode_attention(q, k_t[..., :length], vb[:, :, :length], plan, scale)
        if self.moves is not None:                  # index_select copies first: overlapping moves are safe
            dst, src = self.moves
            whole_k, whole_v = self.k_t[layer][..., :length], self.v[layer][:, :, :length]
            whole_k[dst] = whole_k.index_select(0, src)
            whole_v[dst] = whole_v.index_select(0, src)
        if self.fills is not None:
            idx = plan.page_idx.view(b, -1).index_select(0, self.fills).reshape(-1)
            kg, vg = read_pages(k_pages, v_pages, k_scales, v_scales, idx, q.dtype)
            n = self.fills.numel()
            k_t[self.fills, :, :, :length] = kg.view(n, length, kvh, d).permute(0, 2, 3, 1)
            vb[self.fills, :, :length] = vg.view(n, length, kvh, d).transpose(1, 2)
        # then every row takes this step's token (the rows just read from the pool hold it already: same values)
        fp8 = k_scales is not None and v_scales is not None
        if self._token_idx is None:                 # the same places in every layer's buffers: worked out once
            self._token_idx = self._token_places(plan.tail_pos if fp8 else plan.last[:, None])
        k_idx, v_idx = self._token_idx
        if fp8:
            # FP8: writing this token may have requantised its whole page-head (its scale grew), so the row's
            # current page is read back entire; earlier pages are full and never change during decode
            k, v = read_pages(k_pages, v_pages, k_scales, v_scales, plan.tail_page, q.dtype)   # [B, page, KVH, D]
        elif k_pages.dtype != q.dtype:              # the value the pool holds, as a gather would read it back
            k, v = k.to(k_pages.dtype).to(q.dtype), v.to(v_pages.dtype).to(q.dtype)
        self.k_t[layer].view(-1).index_copy_(0, k_idx, k.reshape(-1))
        self.v[layer].view(-1, d).index_copy_(0, v_idx, v.reshape(-1, d))
        return grouped_decode_attention(q, k_t[..., :length], vb[:, :, :length], plan, scale)

    def _token_places(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Flat indices of the positions ``pos`` [B, P] of rows 0..B-1 in the buffers: elements of ``k_t`` in the
        order (row, position, head, dim) and rows of ``v`` viewed as [-1, D] in the order (row, position, head), the
        order of the values written ([B, P, KVH, D], or [B, KVH, D] with P = 1). Why: one ``index_copy_`` per buffer
        instead of an advanced-index assignment (an ``index_put`` 3-4x as costly, in every layer of every step)."""
        b, kvh, d, cap = pos.shape[0], self.kvh, self.head_dim, self.cap
        row_head = torch.arange(b)[:, None, None] * kvh + torch.arange(kvh)[None, None, :]   # [B, 1, KVH]
        v_idx = row_head * cap + pos[:, :, None]                                            # [B, P, KVH]
        k_idx = (row_head * d * cap + pos[:, :, None])[..., None] + torch.arange(d) * cap   # [B, P, KVH, D]
        return k_idx.reshape(-1), v_idx.reshape(-1)

