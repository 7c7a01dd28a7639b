"""Triton implementations of the reference engine's kernel ops (GPU path), with the signatures of docs/CONTRACTS.md.

``reference_engine.kernels`` (owned by the engine) dispatches here when tensors live on CUDA and Triton imports, and
to ``torch_ops`` otherwise.  The same functions run on CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1``),
which is how the tests check them against the PyTorch reference on machines without a GPU.

One kernel per module: ``triton_attention`` (paged decode attention + fused page-tag check), ``triton_write_kv``
(scatter / fp8 quantise-scatter into pages), ``triton_int4`` (INT4 weight-only GEMV and small-M GEMM).
"""
from __future__ import annotations

from typing import Protocol

import torch

from reference_engine.kernels.triton_attention import paged_decode_attention_impl
from reference_engine.kernels.triton_int4 import int4_linear_impl
from reference_engine.kernels.triton_write_kv import write_kv_impl

__all__ = ["paged_decode_attention", "write_kv", "int4_linear"]


class Int4WeightLike(Protocol):
    """The fields of ``reference_engine.quant.Int4Weight`` that the kernel reads (typed structurally, so this module
    does not import the engine's quantiser)."""

    qweight: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor | None
    group_size: int
    in_features: int
    out_features: int


def paged_decode_attention(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
                           k_scales: torch.Tensor | None, v_scales: torch.Tensor | None,
                           block_tables: torch.Tensor, seq_lens: torch.Tensor,
                           page_tags: torch.Tensor | None, expected_tags: torch.Tensor | None,
                           scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One decode step of attention over paged K/V: ``q [B, H, D] -> (out [B, H, D], tag_mismatch [B] bool)``.

    ``tag_mismatch[b]`` is True when any page sequence ``b`` reads carries a tag other than ``expected_tags[b]`` (or
    its block-table entry is -1 / out of range); its output row is then meaningless and the engine must abort it.
    Only pages within ``seq_lens[b]`` are checked (the pages the kernel reads).  With ``page_tags`` or
    ``expected_tags`` None nothing is checked and the flags are all False.
    """
    return paged_decode_attention_impl(q, k_pages, v_pages, k_scales, v_scales, block_tables, seq_lens,
                                       page_tags, expected_tags, scale)


def write_kv(k: torch.Tensor, v: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
             k_scales: torch.Tensor | None, v_scales: torch.Tensor | None, slot_mapping: torch.Tensor,
             pages_distinct: bool = False) -> None:
    """Store ``k, v [T, num_kv_heads, head_dim]`` at ``slot_mapping [T]`` (page * page_size + offset), in place.

    FP8 pools are quantised per page-head with the scale-growth rule of the contract (see ``triton_write_kv``).
    ``pages_distinct`` is the CPU path's hint (it skips grouping tokens by page); the kernel needs none.
    """
    write_kv_impl(k, v, k_pages, v_pages, k_scales, v_scales, slot_mapping)


def int4_linear(x: torch.Tensor, packed: Int4WeightLike) -> torch.Tensor:
    """``x [M, K] -> x @ dequant(packed).T  [M, N]`` in x's dtype; leading dimensions beyond M are flattened."""
    if x.shape[-1] != packed.in_features:
        raise ValueError(f"int4_linear: x has {x.shape[-1]} features, weight expects {packed.in_features}")
    lead = x.shape[:-1]
    y = int4_linear_impl(x.reshape(-1, x.shape[-1]), packed.qweight, packed.scales, packed.zeros, packed.group_size)
    return y.reshape(*lead, packed.out_features)
