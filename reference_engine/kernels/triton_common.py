"""Helpers shared by the Triton kernels (GPU path of the reference engine).

Why this module exists: the same kernels must run under Triton's CPU interpreter (``TRITON_INTERPRET=1``, used by the
tests on machines without a GPU) and on CUDA.  The interpreter (triton 3.9) has two known defects that matter here:
``tl.dot`` on bf16 inputs is computed wrongly, and float32 -> float8_e4m3 conversion mis-rounds values whose rounding
carries into the next binade (1.96 becomes 1.0 instead of 2.0).  The kernels therefore take a ``DOT_FP32`` switch
(feed ``tl.dot`` float32 operands when interpreted) and round to the e4m3 grid themselves before the cast, which makes
the cast exact on both back ends and the result identical to PyTorch's round-to-nearest-even.
"""
from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

FP8_E4M3_MAX = 448.0


def interpreting() -> bool:
    """True when Triton kernels are executed by the CPU interpreter rather than compiled for a GPU."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def dot_in_fp32(t: torch.Tensor) -> bool:
    """Whether kernels must feed ``tl.dot`` float32 operands (interpreter, CPU tensors, or float32 activations)."""
    return t.device.type != "cuda" or interpreting() or t.dtype == torch.float32


def check_device(*tensors: torch.Tensor | None) -> None:
    """Refuse CPU tensors unless the interpreter is on: a compiled Triton kernel would read host memory as device
    memory."""
    for t in tensors:
        if t is not None and t.device.type != "cuda" and not interpreting():
            raise ValueError(
                f"triton kernels need CUDA tensors (got {t.device}); set TRITON_INTERPRET=1 to run them on the CPU"
            )


def sm_count(device: torch.device) -> int:
    """Number of streaming multiprocessors, used to size split-K / split-KV grids.

    On the CPU (interpreter) it is 1: every extra program costs milliseconds there, and the tests exercise splitting
    through explicit ``split_k`` / ``num_splits`` arguments instead."""
    if device.type == "cuda":
        return _cuda_sm_count(device.index if device.index is not None else torch.cuda.current_device())
    return 1


@functools.cache
def _cuda_sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


@triton.jit
def round_to_e4m3(x):
    """Round float32 ``x`` (already clamped to +-448) to the nearest float8_e4m3 value, ties to even, in float32.

    Normal range: round the 23-bit mantissa to 3 bits with integer arithmetic (the carry correctly bumps the
    exponent).  Subnormal range (|x| < 2**-6, spacing 2**-9): add and subtract 1.5 * 2**14, whose float32 ulp is
    exactly 2**-9, so the hardware's round-to-nearest-even does the work.
    """
    bits = x.to(tl.int32, bitcast=True)
    lsb = (bits >> 20) & 1
    normal = ((bits + 0x7FFFF + lsb) & -1048576).to(tl.float32, bitcast=True)  # -1048576 == ~0xFFFFF
    magic = 24576.0
    sub = (x + magic) - magic
    return tl.where(tl.abs(x) < 0.015625, sub, normal)
