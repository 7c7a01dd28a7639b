"""Kernel dispatch: Triton on CUDA tensors (when triton imports), PyTorch everywhere else.

`REFERENCE_ENGINE_KERNELS=torch|triton` forces a backend (docs/CONTRACTS.md). The Triton module is imported lazily and
only when CUDA is present, so a CPU-only install never needs triton.
"""

from __future__ import annotations

import os
from types import ModuleType

import torch

from reference_engine.kernels import torch_ops
from reference_engine.kernels.torch_ops import check_tags, gather_kv  # noqa: F401  (engine helpers, torch only)

_FORCED = os.environ.get("REFERENCE_ENGINE_KERNELS", "").strip().lower()   # read at import; tests may set it earlier
_triton: ModuleType | None = None
_triton_failed = False


def _triton_ops() -> ModuleType | None:
    global _triton, _triton_failed
    if _triton is None and not _triton_failed:
        try:
            from reference_engine.kernels import triton_ops  # type: ignore[attr-defined]

            _triton = triton_ops
        except Exception:  # triton missing or the kernels module not there yet
            _triton_failed = True
    return _triton


def backend_for(t: torch.Tensor) -> ModuleType:
    if t.device.type == "cpu" and not _FORCED:         # the hot CPU path: no environment lookups per op
        return torch_ops
    forced = os.environ.get("REFERENCE_ENGINE_KERNELS", "").strip().lower()
    if forced == "torch":
        return torch_ops
    if forced == "triton" or (t.is_cuda and torch.cuda.is_available()):
        mod = _triton_ops() if torch.cuda.is_available() else None
        if mod is not None:
            return mod
        if forced == "triton":
            raise RuntimeError("REFERENCE_ENGINE_KERNELS=triton but reference_engine.kernels.triton_ops is unavailable")
    return torch_ops


def paged_decode_attention(q, k_pages, v_pages, k_scales, v_scales, block_tables, seq_lens, page_tags, expected_tags,
                           scale: float):
    backend = backend_for(q)
    if page_tags is None and backend is not torch_ops:
        # check switched off (benchmark of its cost): the Triton kernel always checks, so give it tags that match
        page_tags = torch.zeros(k_pages.shape[0], dtype=torch.int64, device=q.device)
        expected_tags = torch.zeros(block_tables.shape, dtype=torch.int64, device=q.device)
    return backend.paged_decode_attention(
        q, k_pages, v_pages, k_scales, v_scales, block_tables, seq_lens, page_tags, expected_tags, scale
    )


def write_kv(k, v, k_pages, v_pages, k_scales, v_scales, slot_mapping, pages_distinct: bool = False) -> None:
    backend_for(k).write_kv(k, v, k_pages, v_pages, k_scales, v_scales, slot_mapping, pages_distinct)


def int4_linear(x, packed):
    return backend_for(x).int4_linear(x, packed)
