"""Import this first in every kernel test module: it picks the device and makes Triton interpret kernels on the CPU.

Why a helper and not conftest.py: ``triton.jit`` decides at decoration time (module import) whether a kernel is compiled
or interpreted, so ``TRITON_INTERPRET=1`` must be set before ``reference_engine.kernels.triton_*`` is first imported.
If another test package imported those modules earlier in the same pytest process, they are reloaded here so their
kernels become interpreted ones.  On a CUDA machine nothing is changed and the same tests run compiled kernels.
"""
from __future__ import annotations

import importlib
import os
import sys

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"

triton = pytest.importorskip("triton", reason="triton is not installed")

_MODULES = (
    "reference_engine.kernels.triton_common",
    "reference_engine.kernels.triton_attention",
    "reference_engine.kernels.triton_write_kv",
    "reference_engine.kernels.triton_int4",
    "reference_engine.kernels.triton_ops",
)


def _ensure_interpreted() -> None:
    """Reload kernel modules that were imported before TRITON_INTERPRET was set (their kernels would be compiled)."""
    if HAS_CUDA:
        return
    from triton.runtime.interpreter import InterpretedFunction

    attn = sys.modules.get("reference_engine.kernels.triton_attention")
    if attn is not None and not isinstance(attn._paged_decode_kernel, InterpretedFunction):
        for name in _MODULES:
            if name in sys.modules:
                importlib.reload(sys.modules[name])


_ensure_interpreted()

DEVICE = torch.device("cuda" if HAS_CUDA else "cpu")
