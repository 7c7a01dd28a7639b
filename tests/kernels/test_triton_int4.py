"""INT4 weight-only matmul kernels vs an exact dequantise-then-matmul reference: GEMV (M=1) and small-M GEMM paths,
split-K on and off, symmetric and asymmetric groups, group-size edges (group = 32, = K, non-power-of-two, smaller
than the K block), odd N and K not a power of two."""
from __future__ import annotations

import kernel_ref as ref
import pytest
import torch
from kernel_env import DEVICE  # sets TRITON_INTERPRET on CPU before the kernels are imported

from reference_engine.kernels import triton_ops
from reference_engine.kernels.triton_int4 import int4_linear_impl
from reference_engine.quant import Int4Weight, quantize_int4


def _pack(w: torch.Tensor, group: int, asym: bool) -> Int4Weight:
    """The engine's quantiser: the format under test."""
    return quantize_int4(w, group, asymmetric=asym)


def _to(p: Int4Weight, device: str) -> Int4Weight:
    return Int4Weight(p.qweight.to(device), p.scales.to(device), None if p.zeros is None else p.zeros.to(device),
                      p.group_size, p.in_features, p.out_features)


def _want(x: torch.Tensor, p) -> torch.Tensor:
    return x.float().cpu() @ ref.dequant_int4(p).t()


SHAPES = [
    # M, N, K, group
    pytest.param((1, 37, 256, 128), id="gemv-g128-oddN"),
    pytest.param((1, 16, 96, 32), id="gemv-g32-K96"),
    pytest.param((1, 24, 192, 48), id="gemv-g48-nonpow2"),
    pytest.param((1, 8, 64, 64), id="gemv-g=K"),
    pytest.param((1, 8, 256, 16), id="gemv-g16-gather"),
    pytest.param((3, 40, 128, 64), id="gemm-M3"),
    pytest.param((5, 24, 192, 48), id="gemm-g48-nonpow2"),
    pytest.param((17, 20, 64, 64), id="gemm-M17-g=K"),
]


@pytest.mark.parametrize("asym", [False, True], ids=["sym", "asym"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("split_k", [1, 2])
def test_matches_dequantised_matmul(shape, asym, split_k):
    M, N, K, G = shape
    g = torch.Generator().manual_seed(M * 1000 + N + K)
    w = torch.randn(N, K, generator=g)
    p = _pack(w, G, asym)
    x = torch.randn(M, K, generator=g).bfloat16()
    y = int4_linear_impl(x.to(DEVICE), p.qweight.to(DEVICE), p.scales.to(DEVICE),
                         None if p.zeros is None else p.zeros.to(DEVICE), G, split_k=split_k)
    want = _want(x, p)
    assert y.dtype == x.dtype and y.shape == (M, N)
    rel = (y.float().cpu() - want).abs().max().item() / want.abs().max().item()
    assert rel < 1e-2, f"relative error {rel:.3g}"  # bf16 output rounding (~0.4%) dominates


def test_float32_activations_and_public_op():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(48, 128, generator=g)
    p = _pack(w, 64, False)
    for M in (1, 4):
        x = torch.randn(2, M, 128, generator=g)  # leading dims are flattened by the public op
        y = triton_ops.int4_linear(x.to(DEVICE), _to(p, DEVICE))
        assert y.shape == (2, M, 48) and y.dtype == torch.float32
        want = _want(x.reshape(-1, 128), p).reshape(2, M, 48)
        # fp32 path: exact in the interpreter; TF32 tensor cores on the GPU GEMM path
        assert (y.cpu() - want).abs().max().item() < 5e-3 * want.abs().max().item()


def test_gemm_path_also_serves_m1():
    """The GEMM kernel must agree with the GEMV kernel on the same input (batched decode with one live sequence)."""
    g = torch.Generator().manual_seed(2)
    p = _pack(torch.randn(32, 128, generator=g), 32, True)
    x = torch.randn(1, 128, generator=g).bfloat16().to(DEVICE)
    args = (p.qweight.to(DEVICE), p.scales.to(DEVICE), p.zeros.to(DEVICE), 32)
    a = int4_linear_impl(x, *args).float()
    b = int4_linear_impl(x, *args, force_gemm=True).float()
    assert (a - b).abs().max().item() <= 1e-2 * a.abs().max().item()


def test_bad_inputs_raise_clear_errors():
    p = _pack(torch.randn(8, 64), 32, False)
    with pytest.raises(ValueError, match="weight expects 64"):
        triton_ops.int4_linear(torch.zeros(1, 32, device=DEVICE), _to(p, DEVICE))
    with pytest.raises(ValueError, match="group_size 24"):
        int4_linear_impl(torch.zeros(1, 64, device=DEVICE), p.qweight.to(DEVICE), p.scales.to(DEVICE), None, 24)


@pytest.mark.parametrize("M", [1, 6])
def test_many_split_k_slices_fused_reduction(M):
    """Many K slices per output tile: the last slice to arrive sums the partials (real concurrency on a GPU, where
    a missing barrier or fence would show up as wrong or flaky outputs; repeated to catch stale counters)."""
    N, K, G, splits = (4096, 8192, 128, 16) if DEVICE.type == "cuda" else (24, 512, 64, 4)
    g = torch.Generator().manual_seed(M)
    p = _pack(torch.randn(N, K, generator=g), G, False)
    want = None
    for _ in range(3):
        x = torch.randn(M, K, generator=g).bfloat16()
        y = int4_linear_impl(x.to(DEVICE), p.qweight.to(DEVICE), p.scales.to(DEVICE), None, G, split_k=splits,
                             block_k=64)
        want = _want(x, p)
        rel = (y.float().cpu() - want).abs().max().item() / want.abs().max().item()
        assert rel < 1e-2, f"relative error {rel:.3g}"
