"""INT4 group-wise weights: format, round-trip error, bytes, CPU kernel, separate prefill/decode formats."""

from __future__ import annotations

import pytest
import torch

from reference_engine.kernels import torch_ops
from reference_engine.quant import dequantize_int4, quantize_int4, unpack_nibbles

from .conftest import Collector, greedy, make_engine


def test_packing_layout_matches_contract():
    w = torch.zeros(1, 128)
    w[0, 0], w[0, 1] = -7.0, 7.0                             # scale = 1 -> q = -7 (nibble 1), +7 (nibble 15)
    p = quantize_int4(w, 128, scale_dtype=torch.float32)
    assert p.qweight.dtype == torch.uint8 and p.qweight.shape == (1, 64)
    assert int(p.qweight[0, 0]) == 1 | (15 << 4)            # element 0 low nibble, element 1 high nibble
    assert int(p.qweight[0, 1]) == 8 | (8 << 4)              # zeros -> q = 0 -> nibble 8
    assert unpack_nibbles(p.qweight)[0, :2].tolist() == [1, 15]


@pytest.mark.parametrize("asym", [False, True])
def test_round_trip_error_is_within_half_a_step(asym):
    torch.manual_seed(0)
    w = torch.randn(256, 512)
    p = quantize_int4(w, 128, asymmetric=asym, scale_dtype=torch.float32)
    err = (dequantize_int4(p) - w).abs().reshape(256, 4, 128)
    step = p.scales.float()[..., None]
    assert (err <= step / 2 + 1e-6).all()
    rel = (dequantize_int4(p) - w).norm() / w.norm()
    assert rel < 0.12, rel                                   # ~ step / sqrt(12) for Gaussian weights


def test_int4_bytes_at_most_0_28_of_bf16():
    w = torch.randn(1024, 1024)
    p = quantize_int4(w, 128)
    bf16_bytes = w.numel() * 2
    assert p.nbytes() / bf16_bytes <= 0.28
    assert p.nbytes() == 1024 * 512 + 1024 * 8 * 2          # packed nibbles + bf16 scales


def test_int4_linear_cpu_kernel_matches_dequantised_matmul():
    torch.manual_seed(1)
    w = torch.randn(96, 256)
    p = quantize_int4(w, 128)
    x = torch.randn(5, 256)
    ref = x @ dequantize_int4(p).t()
    y = torch_ops.int4_linear(x, p)
    assert y.shape == (5, 96)
    # the aten kernel takes bf16 activations: allow bf16-level relative error
    assert ((y - ref).abs().max() / ref.abs().max()) < 2e-2


def test_engine_int4_decode_bf16_prefill(llama_ckpt):
    prompt = list(range(5, 40))
    runs = {}
    for name, kw in {"bf16": dict(weights="bf16"), "int4": dict(weights="int4"),
                     "split": dict(weights="bf16", decode_weights="int4")}.items():
        eng = make_engine(llama_ckpt, **kw)
        c = Collector()
        eng.submit("r", prompt, greedy(6, logprobs=True), c)
        eng.run_until_idle()
        runs[name] = (eng, c)
    eng_split = runs["split"][0]
    attn = eng_split.model.layers[0].self_attn.qkv_proj
    assert attn.prefill is not attn.decode and attn.decode.packed is not None and attn.prefill.weight is not None
    bf, i4, sp = (runs[k][1].choices for k in ("bf16", "int4", "split"))
    assert abs(sp[0].logprob - bf[0].logprob) < 1e-5         # first token comes from the (bf16) prefill
    assert abs(i4[0].logprob - bf[0].logprob) > 1e-6          # full int4 differs already at prefill
    assert runs["int4"][1].finish.completion_tokens == 6
