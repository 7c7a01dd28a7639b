"""KV pool sizing, FP8 pages, prefix cache, page tags and fault injection."""

from __future__ import annotations

import pytest
import torch

from reference_engine.config import ModelConfig
from reference_engine.kernels import torch_ops
from reference_engine.kv_cache import KVPool

from .conftest import Collector, greedy, make_engine, solo_tokens


def _cfg(path) -> ModelConfig:
    return ModelConfig.from_file(path / "config.json")


def test_fp8_pool_holds_about_twice_the_tokens_at_equal_bytes(llama_ckpt):
    cfg = _cfg(llama_ckpt)
    budget = 8 * 1024 * 1024
    bf16 = KVPool(cfg, kv_dtype="bf16", page_size=16, budget_bytes=budget)
    fp8 = KVPool(cfg, kv_dtype="fp8", page_size=16, budget_bytes=budget)
    ratio = fp8.capacity_tokens / bf16.capacity_tokens
    assert 1.95 <= ratio <= 2.0, ratio
    assert fp8.info().bytes <= budget and bf16.info().bytes <= budget
    assert fp8.k_pages[0].dtype == torch.float8_e4m3fn


def test_fp8_write_uses_per_page_head_scales_and_requantises():
    torch.manual_seed(0)
    pages = torch.zeros(4, 8, 2, 16, dtype=torch.float8_e4m3fn)
    vpages = torch.zeros_like(pages)
    ks = torch.zeros(4, 2)
    vs = torch.zeros(4, 2)
    x = torch.randn(6, 2, 16)
    x[:, 1] *= 50                                           # head 1 is 50x larger: needs its own scale
    torch_ops.write_kv(x[:3], x[:3], pages, vpages, ks, vs, torch.tensor([8, 9, 10]))   # page 1, offsets 0..2
    s_before = ks[1].clone()
    big = x[3:4] * 10                                       # raises the amax: page-head must be requantised
    torch_ops.write_kv(big, big, pages, vpages, ks, vs, torch.tensor([11]))
    assert (ks[1] > s_before).all()
    assert ks[1, 1] > 20 * ks[1, 0]                          # per-head scales differ as the data does
    assert torch.allclose(ks[1], torch.cat([x[:3], big]).abs().amax(dim=(0, 2)) / 448)
    deq = pages[1, :4].float() * ks[1][None, :, None]
    ref = torch.cat([x[:3], big])
    rel = (deq - ref).abs().amax() / ref.abs().amax()
    assert rel < 0.07, rel                                  # e4m3 has 3 mantissa bits; requantising adds one rounding
    assert ks[0].eq(0).all() and ks[2].eq(0).all()          # untouched pages keep scale 0


def _fp8_write_by_hand(x, pages, scales, slots):
    """The FP8 write rule, one page-head and one token at a time (float32 arithmetic, as the rule states it): a
    touched page-head's scale grows to cover its new tokens' amax / 448; the heads of a page where one grew are
    requantised by old / new scale (a ratio of 1 where it did not); then each token is stored as x / scale."""
    ps, kvh = pages.shape[1], pages.shape[2]
    touched = sorted({s // ps for s in slots})
    new = {}
    for p in touched:
        for h in range(kvh):
            amax = max(x[t, h].float().abs().max() for t, s in enumerate(slots) if s // ps == p)
            new[p, h] = torch.maximum(scales[p, h], amax / 448)
    for p in touched:
        if not any(bool(new[p, h] > scales[p, h]) for h in range(kvh)):
            continue
        for h in range(kvh):
            ratio = scales[p, h] / new[p, h] if bool(new[p, h] > 0) else torch.zeros(())
            pages[p, :, h] = (pages[p, :, h].float() * ratio).clamp(-448, 448).to(pages.dtype)
            scales[p, h] = new[p, h]
    for t, s in enumerate(slots):
        for h in range(kvh):
            n = new[s // ps, h]
            safe = n if bool(n > 0) else torch.ones(())
            pages[s // ps, s % ps, h] = (x[t, h].float() / safe).clamp(-448, 448).to(pages.dtype)


@pytest.mark.parametrize("hint", [False, True], ids=["grouped", "decode-hint"])
def test_fp8_write_equals_the_rule_by_hand_bit_for_bit(hint):
    """Prefill chunks sharing pages, then decode appends whose amax grows now and then, over stale bytes. With
    ``hint``, calls whose tokens all sit in different pages (the decode steps) say so (``pages_distinct``), as the
    engine's decode does, and take the path that skips grouping tokens by page: the same bits."""
    g = torch.Generator().manual_seed(1)
    ps, kvh, d = 4, 2, 8
    got = [(torch.randn(8, ps, kvh, d, generator=g) * 100).to(torch.float8_e4m3fn) for _ in range(2)]
    got_s = [torch.zeros(8, kvh), torch.zeros(8, kvh)]                   # fresh owners: scales reset to 0
    want, want_s = [p.clone() for p in got], [s.clone() for s in got_s]
    calls = [[0, 1, 2, 3, 4, 5, 20, 21, 22], [6, 23], [7, 24], [8, 25], [9, 26], [10, 27, 28, 29, 30]]
    for n, slots in enumerate(calls):
        k = (torch.randn(len(slots), kvh, d, generator=g) * (1 + n % 3)).to(torch.bfloat16)
        v = (torch.randn(len(slots), kvh, d, generator=g) * (3 - n % 3)).to(torch.bfloat16)
        distinct = len({sl // ps for sl in slots}) == len(slots)
        torch_ops.write_kv(k, v, got[0], got[1], got_s[0], got_s[1], torch.tensor(slots),
                           pages_distinct=hint and distinct)
        for x, i in ((k, 0), (v, 1)):
            _fp8_write_by_hand(x, want[i], want_s[i], slots)
            assert torch.equal(got_s[i], want_s[i]), (n, i)
            assert torch.equal(got[i].view(torch.uint8), want[i].view(torch.uint8)), (n, i)


def test_fp8_engine_tracks_fp32_closely(llama_ckpt):
    prompt = list(range(5, 45))
    out = {}
    for kv in ("fp32", "fp8"):
        eng = make_engine(llama_ckpt, kv_dtype=kv)
        c = Collector()
        eng.submit("r", prompt, greedy(8, logprobs=True, top_logprobs=5), c)
        eng.run_until_idle()
        out[kv] = c
    diffs = [abs(a.logprob - b.logprob) for a, b in zip(out["fp32"].choices, out["fp8"].choices)]
    assert out["fp8"].tokens[0] == out["fp32"].tokens[0]
    assert diffs[0] < 1e-5                                   # prefill attends to fresh K/V: unaffected
    assert 0 < diffs[1] < 0.1                                # decode reads fp8 pages: close, not identical


def test_prefix_cache_reuses_full_pages_and_reports_cached_tokens(llama_ckpt):
    eng = make_engine(llama_ckpt, page_size=16)
    shared = list(range(10, 60))                            # 50 tokens = 3 full pages + 2
    a, b = Collector(), Collector()
    eng.submit("a", shared + [3, 4], greedy(4), a)
    eng.run_until_idle()
    eng.submit("b", shared + [7, 8, 9], greedy(4), b)
    eng.run_until_idle()
    assert a.finish.cached_tokens == 0
    assert b.finish.cached_tokens == 48
    # and the reuse is exact: same result as an engine with the cache off
    off = make_engine(llama_ckpt, page_size=16, prefix_cache=False)
    c = Collector()
    off.submit("c", shared + [7, 8, 9], greedy(4, logprobs=True), c)
    off.run_until_idle()
    assert c.finish.cached_tokens == 0
    assert c.tokens == b.tokens
    assert eng.metrics.prefix_cached_tokens == 48


def test_prefix_cache_never_serves_the_last_token_and_survives_eviction(llama_ckpt):
    # a pool of 6 pages: the cached pages of the first request get evicted by the second
    cfg = _cfg(llama_ckpt)
    from reference_engine.kv_cache import bytes_per_page

    eng = make_engine(llama_ckpt, page_size=8, kv_budget_bytes=6 * bytes_per_page(cfg, "fp32", 8))
    p = list(range(20, 36))                                  # exactly 2 pages
    c1, c2, c3 = Collector(), Collector(), Collector()
    eng.submit("1", p, greedy(2), c1)
    eng.run_until_idle()
    eng.submit("2", p, greedy(2), c2)                        # whole prompt cached -> still computes the last token
    eng.run_until_idle()
    assert c2.finish.cached_tokens == 8
    assert c2.tokens == c1.tokens
    eng.submit("3", list(range(100, 140)), greedy(2), c3)    # 5 pages + decode: evicts the cached ones
    eng.run_until_idle()
    assert c3.finish is not None and eng.blocks.num_free == 6


def test_tag_check_catches_every_injected_fault_and_spares_the_others(llama_ckpt):
    prompts = [list(range(3 + i, 40 + 3 * i)) for i in range(6)]
    ref = solo_tokens(llama_ckpt, prompts, 12, page_size=8)
    eng = make_engine(llama_ckpt, page_size=8, allow_fault_injection=True)
    cols = [Collector() for _ in prompts]
    for i, (p, c) in enumerate(zip(prompts, cols)):
        eng.submit(f"r{i}", p, greedy(12), c)
    victims = {1, 4}
    for _ in range(3):                                       # prefill + a couple of decode steps
        eng.step()
    for v in victims:
        eng.inject_fault(f"r{v}")
    eng.run_until_idle()
    for i, c in enumerate(cols):
        if i in victims:
            assert c.error is not None and c.error.type == "kv_integrity_error" and c.error.status == 500
            assert c.finish is None
        else:
            assert c.error is None and c.tokens == ref[i]
    m = eng.metrics.snapshot()
    assert m["kv_faults_injected"] == 2 and m["kv_tag_failures"] == 2
    assert m["kv_tag_checks"] > 0
    assert eng.blocks.num_free == eng.pool.num_pages          # nothing leaked, stolen pages included


def test_many_faults_all_caught(llama_ckpt):
    eng = make_engine(llama_ckpt, page_size=4, allow_fault_injection=True)
    cols = [Collector() for _ in range(20)]
    for i, c in enumerate(cols):
        eng.submit(f"r{i}", list(range(5, 15 + i)), greedy(6), c)
    eng.step()
    for i in range(0, 20, 2):
        eng.inject_fault(f"r{i}")
    eng.run_until_idle()
    caught = [c.error is not None and c.error.type == "kv_integrity_error" for c in cols]
    assert caught == [i % 2 == 0 for i in range(20)]          # 10/10 injected faults caught, no false alarms


def test_check_tags_kernel():
    tags = torch.tensor([5, 6, 7, 8])
    bt = torch.tensor([[0, 1, -1], [2, 3, -1]], dtype=torch.int32)
    et = torch.tensor([[5, 6, 0], [7, 9, 0]])
    assert torch_ops.check_tags(tags, bt, et).tolist() == [False, True]


def test_generated_pages_are_cached_for_the_next_turn(llama_ckpt):
    eng = make_engine(llama_ckpt, page_size=8)
    first = Collector()
    prompt = list(range(30, 50))                             # 20 tokens
    eng.submit("t1", prompt, greedy(20), first)
    eng.run_until_idle()
    follow = Collector()
    eng.submit("t2", prompt + first.tokens + [5, 6, 7], greedy(2), follow)   # 43 tokens: 5 full pages
    eng.run_until_idle()
    # 39 tokens have K/V (the last sampled token is never fed back): 4 full pages, two of them holding reply tokens;
    # prefill alone would have published only 2
    assert follow.finish.cached_tokens == 32
