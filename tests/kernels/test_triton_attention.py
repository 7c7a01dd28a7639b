"""Paged decode attention kernel vs the PyTorch reference: bf16 and fp8 pools, GQA, odd lengths, partial last pages,
split-KV on and off, and the fused page-tag check flagging exactly the corrupted sequences."""
from __future__ import annotations

import math

import kernel_ref as ref
import pytest
import torch
from kernel_env import DEVICE  # sets TRITON_INTERPRET on CPU before the kernels are imported
from kernel_pools import make_pool

from reference_engine.kernels import triton_ops
from reference_engine.kernels.triton_attention import paged_decode_attention_impl

CASES = [
    # seq_lens, num_heads, num_kv_heads, head_dim, page_size
    pytest.param(([1, 17, 40], 4, 2, 32, 16), id="gqa2-odd-lens"),
    pytest.param(([33, 5], 7, 1, 16, 8), id="gqa7-mqa"),
    pytest.param(([23, 64], 6, 3, 24, 16), id="headdim24-full-page"),
    pytest.param(([9], 2, 2, 16, 4), id="mha-small-pages"),
    pytest.param(([13, 30], 4, 2, 16, 6), id="page-size-6"),
]


def _check(pool, out, flags, scale, atol):
    want, want_bad = ref.attention(*pool.args(scale))
    assert flags.dtype == torch.bool and flags.shape == want_bad.shape
    assert torch.equal(flags.cpu(), want_bad)
    assert out.dtype == pool.q.dtype and out.shape == pool.q.shape
    err = (out.float().cpu() - want).abs().max().item()
    assert err < atol, f"max abs error {err:.4g} >= {atol}"


@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.slow
def test_matches_reference(case, kv_dtype, num_splits):
    seq_lens, H, Hkv, D, S = case
    pool = make_pool(seq_lens, num_heads=H, num_kv_heads=Hkv, head_dim=D, page_size=S, kv_dtype=kv_dtype,
                     device=DEVICE, seed=len(seq_lens) * 100 + H)
    scale = 1.0 / math.sqrt(D)
    out, flags = paged_decode_attention_impl(*pool.args(scale), num_splits=num_splits, block_n=16)
    # bf16 output (1 ulp ~ 0.4%) plus bf16 tensor-core inputs on the GPU path
    _check(pool, out, flags, scale, atol=3e-2)
    assert not flags.any()


def test_public_op_default_splits():
    pool = make_pool([50, 3, 31], num_heads=8, num_kv_heads=2, head_dim=32, page_size=16, kv_dtype="fp8",
                     device=DEVICE, seed=7, extra_table=4)
    out, flags = triton_ops.paged_decode_attention(*pool.args(0.17))
    _check(pool, out, flags, 0.17, atol=3e-2)


@pytest.mark.parametrize("num_splits", [1, 2])
def test_tag_mismatch_flags_only_the_corrupted_sequences(num_splits):
    pool = make_pool([20, 35, 7, 16], num_heads=4, num_kv_heads=2, head_dim=16, page_size=8, kv_dtype="bf16",
                     device=DEVICE, seed=11)
    # seq 1: its last (partial) page was reassigned -> the pool-wide tag moved on
    last = int(pool.block_tables[1, (35 - 1) // 8])
    pool.page_tags[last] += 1
    # seq 3: a block-table entry inside its length was lost (-1)
    pool.block_tables[3, 1] = -1
    # seq 2: a stale expected tag *beyond* its length must not count
    pool.expected_tags[2, 3] = 12345
    out, flags = paged_decode_attention_impl(*pool.args(0.25), num_splits=num_splits, block_n=16)
    assert flags.cpu().tolist() == [False, True, False, True]
    want, _ = ref.attention(*pool.args(0.25))
    for b in (0, 2):  # unaffected sequences still get exact attention
        assert (out[b].float().cpu() - want[b]).abs().max().item() < 3e-2


def test_length_beyond_block_table_is_flagged():
    """A seq_len that runs past the sequence's block table must be an integrity failure, never an out-of-range read."""
    pool = make_pool([10, 10], num_heads=2, num_kv_heads=1, head_dim=16, page_size=4, kv_dtype="bf16",
                     device=DEVICE, seed=5, extra_table=0)
    pool.seq_lens[1] = 13  # 4 pages' worth, the table holds 3
    _, flags = paged_decode_attention_impl(*pool.args(0.25))
    assert flags.cpu().tolist() == [False, True]


def test_tag_check_off_reports_nothing():
    """The benchmark's knob for measuring the check's cost: with it off the flags are all False."""
    pool = make_pool([12, 12], num_heads=2, num_kv_heads=1, head_dim=16, page_size=4, kv_dtype="bf16",
                     device=DEVICE, seed=3)
    pool.page_tags.add_(1)
    _, flags = paged_decode_attention_impl(*pool.args(0.25), check_tags=False)
    assert not flags.any()
    args = list(pool.args(0.25))
    args[7] = args[8] = None  # no tags given, as torch_ops allows
    _, flags = triton_ops.paged_decode_attention(*args)
    assert not flags.any()
    _, flags = paged_decode_attention_impl(*pool.args(0.25))
    assert flags.all()


def test_bad_shapes_raise_clear_errors():
    pool = make_pool([5], num_heads=3, num_kv_heads=2, head_dim=16, page_size=4, kv_dtype="bf16",
                     device=DEVICE, seed=1)
    with pytest.raises(ValueError, match="not a multiple of num_kv_heads"):
        triton_ops.paged_decode_attention(*pool.args(0.25))
    pool = make_pool([5], num_heads=2, num_kv_heads=2, head_dim=16, page_size=4, kv_dtype="fp8",
                     device=DEVICE, seed=1)
    with pytest.raises(ValueError, match="need k_scales"):
        triton_ops.paged_decode_attention(pool.q, pool.k_pages, pool.v_pages, None, None, pool.block_tables,
                                          pool.seq_lens, pool.page_tags, pool.expected_tags, 0.25)


def test_matches_engine_torch_ops():
    """Same answer as the engine's own PyTorch op (the CPU path the verifier uses by default)."""
    torch_ops = pytest.importorskip("reference_engine.kernels.torch_ops", reason="engine torch_ops not present yet")
    pool = make_pool([19, 8], num_heads=4, num_kv_heads=2, head_dim=32, page_size=8, kv_dtype="fp8",
                     device=DEVICE, seed=5)
    out, flags = triton_ops.paged_decode_attention(*pool.args(0.2))
    cpu = [None if t is None else t.cpu() for t in pool.args(0.2)[:-1]]
    want, want_flags = torch_ops.paged_decode_attention(*cpu, 0.2)
    assert torch.equal(flags.cpu(), want_flags.cpu())
    assert (out.float().cpu() - want.float()).abs().max().item() < 3e-2
