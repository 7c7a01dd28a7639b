"""write_kv kernel vs the PyTorch references: bf16 scatter, fp8 prefill into fresh pages, fp8 decode appends that
do and do not grow a partially filled page-head's scale (requantising its old entries), padding slots skipped."""
from __future__ import annotations

import kernel_ref as ref
import pytest
import torch
from kernel_env import DEVICE  # sets TRITON_INTERPRET on CPU before the kernels are imported

from reference_engine.kernels import triton_ops


def _slots_for(seq_lens: list[int], start_offsets: list[int], tables: list[list[int]], page_size: int) -> list[int]:
    """Slots of `n` new tokens per sequence, starting at offset `o` of its logical token stream."""
    slots = []
    for n, o, table in zip(seq_lens, start_offsets, tables):
        for pos in range(o, o + n):
            slots.append(table[pos // page_size] * page_size + pos % page_size)
    return slots


def _pool(num_pages, page_size, hkv, d, fp8, seed):
    g = torch.Generator().manual_seed(seed)
    garbage = torch.randn(num_pages, page_size, hkv, d, generator=g) * 3  # stale bytes from earlier owners
    if fp8:
        kp = garbage.to(torch.float8_e4m3fn)
        vp = (garbage * 0.5).to(torch.float8_e4m3fn)
        ks = torch.rand(num_pages, hkv, generator=g)  # stale scales: a page written from offset 0 must ignore them
        vs = torch.rand(num_pages, hkv, generator=g)
        return kp, vp, ks, vs
    return garbage.bfloat16(), (garbage * 0.5).bfloat16(), None, None


def _run_both(k, v, pool, slots):
    """Apply the kernel (on DEVICE) and the reference (on CPU copies) to the same pool; return both results."""
    cpu = [None if t is None else t.clone() for t in pool]
    dev = [None if t is None else t.clone().to(DEVICE) for t in pool]
    ref.write_kv(k, v, *cpu, torch.tensor(slots))
    triton_ops.write_kv(k.to(DEVICE), v.to(DEVICE), *dev, torch.tensor(slots, device=DEVICE))
    return cpu, [None if t is None else t.cpu() for t in dev]


def _assert_same(cpu, dev):
    for want, got in zip(cpu, dev):
        if want is None:
            assert got is None
            continue
        assert torch.equal(want.float(), got.float()), f"max diff {(want.float() - got.float()).abs().max()}"


def test_bf16_scatter_and_padding_slots():
    g = torch.Generator().manual_seed(0)
    T, hkv, d, S = 9, 3, 24, 4
    k = torch.randn(T, hkv, d, generator=g).bfloat16()
    v = torch.randn(T, hkv, d, generator=g).bfloat16()
    slots = [5, 6, 7, 8, -1, 0, 13, -1, 2]
    pool = _pool(5, S, hkv, d, fp8=False, seed=1)
    cpu, dev = _run_both(k, v, pool, slots)
    _assert_same(cpu, dev)
    assert torch.equal(dev[0].reshape(-1, hkv, d)[5], k[0])


@pytest.mark.parametrize("page_size", [8, 6])
def test_fp8_prefill_then_decode_growth(page_size):
    hkv, d = 2, 16
    g = torch.Generator().manual_seed(page_size)
    tables = [[3, 0, 6], [5, 1], [2, 4]]
    pool = _pool(8, page_size, hkv, d, fp8=True, seed=2)
    lens = [page_size * 2 + 3, page_size, 5]
    slots = _slots_for(lens, [0, 0, 0], tables, page_size)
    k = torch.randn(len(slots), hkv, d, generator=g).bfloat16()
    v = torch.randn(len(slots), hkv, d, generator=g).bfloat16()
    cpu, dev = _run_both(k, v, pool, slots)
    _assert_same(cpu, dev)
    # the stale scales of pages written from offset 0 were replaced by the new tokens' amax / 448
    page = tables[2][0]
    want = k[sum(lens[:2]):].float().abs().amax(dim=(0, 2)) / 448
    assert torch.allclose(dev[2][page], want, rtol=1e-6)

    # decode: seq 0 appends a 10x outlier (its partially filled page-head must grow and be requantised),
    # seq 1 starts a fresh page, seq 2 appends a small token (no growth)
    slots2 = _slots_for([1, 1, 1], lens, tables, page_size)
    k2 = torch.randn(3, hkv, d, generator=g)
    k2[0] *= 10
    k2[2] *= 0.01
    v2 = torch.randn(3, hkv, d, generator=g)
    v2[0, 1] *= 20
    old_scales = dev[2].clone()
    cpu2, dev2 = _run_both(k2.bfloat16(), v2.bfloat16(), dev, slots2)
    _assert_same(cpu2, dev2)
    p0 = tables[0][2]
    assert (dev2[2][p0] > old_scales[p0]).all(), "outlier must grow the page-head scale"
    p2 = tables[2][0]
    assert torch.equal(dev2[2][p2], old_scales[p2]), "a small token must not change the scale"
    # requantised old entries still dequantise close to what was written
    old_tokens = k[: page_size * 2 + 3][page_size * 2:].float()
    deq = dev2[0][p0, :3].float() * dev2[2][p0][None, :, None]
    assert (deq - old_tokens).abs().max() <= dev2[2][p0].max() * 16  # within a few fp8 steps of the new scale


def test_fp8_matches_engine_torch_ops():
    """Same bytes and scales as the engine's PyTorch op, given its block manager's discipline (fresh pages have
    scale 0)."""
    torch_ops = pytest.importorskip("reference_engine.kernels.torch_ops", reason="engine torch_ops not present yet")
    hkv, d, S = 2, 32, 8
    g = torch.Generator().manual_seed(9)
    kp, vp, ks, vs = _pool(6, S, hkv, d, fp8=True, seed=4)
    ks.zero_()
    vs.zero_()
    pool = [kp, vp, ks, vs]
    tables = [[4, 1], [0, 5]]
    written: list[int] = []  # torch_ops also zeroes never-written bytes of a fresh page; only written slots count
    for step, (lens, starts) in enumerate((([11, 6], [0, 0]), ([1, 1], [11, 6]), ([3, 1], [12, 7]))):
        slots = _slots_for(lens, starts, tables, S)
        k = (torch.randn(len(slots), hkv, d, generator=g) * (1 + 4 * step)).bfloat16()
        v = torch.randn(len(slots), hkv, d, generator=g).bfloat16()
        eng = [t.clone() for t in pool]
        torch_ops.write_kv(k, v, *eng, torch.tensor(slots))
        dev = [t.clone().to(DEVICE) for t in pool]
        triton_ops.write_kv(k.to(DEVICE), v.to(DEVICE), *dev, torch.tensor(slots, device=DEVICE))
        dev = [t.cpu() for t in dev]
        written += slots
        idx = torch.tensor(written)
        for name, want, got in zip(("k_pages", "v_pages"), eng, dev):
            want, got = want.reshape(-1, hkv, d)[idx].float(), got.reshape(-1, hkv, d)[idx].float()
            assert torch.equal(want, got), f"step {step}: {name} differs"
        for name, want, got in zip(("k_scales", "v_scales"), eng[2:], dev[2:]):
            assert torch.equal(want, got), f"step {step}: {name} differs"
        pool = dev


def test_shape_errors_are_clear():
    kp, vp, ks, vs = _pool(2, 4, 2, 16, fp8=True, seed=0)
    k = torch.zeros(3, 2, 8)
    with pytest.raises(ValueError, match="do not fit pages"):
        triton_ops.write_kv(k.to(DEVICE), k.to(DEVICE), kp.to(DEVICE), vp.to(DEVICE), ks.to(DEVICE), vs.to(DEVICE),
                            torch.zeros(3, dtype=torch.int64, device=DEVICE))
    k = torch.zeros(3, 2, 16)
    with pytest.raises(ValueError, match="need k_scales"):
        triton_ops.write_kv(k.to(DEVICE), k.to(DEVICE), kp.to(DEVICE), vp.to(DEVICE), None, None,
                            torch.zeros(3, dtype=torch.int64, device=DEVICE))
