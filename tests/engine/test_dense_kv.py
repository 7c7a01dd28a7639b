"""The CPU decode's dense K/V (reference_engine/dense_kv.py) gives exactly what reading the pages gives.

The dense buffers are a copy of the paged pool kept across steps; the risk is a stale copy (a batch that changed,
a preempted request recomputed, a buffer that grew) silently feeding attention. So the same traffic (staggered
arrivals, requests of different lengths finishing at different steps, preemption under a small pool) runs once with
the buffers and once with the page gather, and every token and logprob must agree bit for bit.
"""

from __future__ import annotations

import time

import pytest

from reference_engine import engine as engine_module
from reference_engine.config import ModelConfig
from reference_engine.engine import Engine
from reference_engine.kv_cache import bytes_per_page
from reference_engine.sequence import SamplingParams

from .conftest import Collector, make_engine


def traffic(eng: Engine) -> list[Collector]:
    """Six requests: three at once, then one more every two steps; lengths and max_tokens all differ."""
    prompts = [list(range(5 + i, 5 + i + n)) for i, n in enumerate((20, 3, 33, 9, 17, 26))]
    cols = [Collector() for _ in prompts]
    for i, (p, c) in enumerate(zip(prompts, cols)):
        eng.submit(f"r{i}", p, SamplingParams(temperature=0, max_tokens=12 + 7 * i, ignore_eos=True, logprobs=True,
                                              top_logprobs=3), c)
        if i >= 2:
            for _ in range(2):
                eng._drain_inbox()
                eng.step()
    eng.run_until_idle()
    return cols


@pytest.mark.parametrize("kv", ["fp32", "bf16", "fp8"])
def test_dense_decode_equals_the_page_gather_bit_for_bit(llama_ckpt, kv):
    cfg = ModelConfig.from_file(llama_ckpt / "config.json")
    # 16 pages of 8 tokens for requests that grow to ~80 tokens together: preemption happens
    kw = dict(page_size=8, kv_dtype=kv, kv_budget_bytes=16 * bytes_per_page(cfg, kv, 8), prefix_cache=False)
    gather = make_engine(llama_ckpt, **kw)
    gather.dense = None                                      # the reference: every step reads the pages
    dense = make_engine(llama_ckpt, **kw)
    assert dense.dense is not None
    want, got = traffic(gather), traffic(dense)
    assert dense.metrics.preemptions > 0 and gather.metrics.preemptions == dense.metrics.preemptions
    for w, g in zip(want, got):
        assert g.error is None and len(g.tokens) == len(w.tokens) > 0
        assert [(c.token_id, c.logprob, c.top) for c in g.choices] == [(c.token_id, c.logprob, c.top)
                                                                          for c in w.choices]
    # and the buffers were really used across steps, not refilled every step
    assert dense.dense.steps > 40 and dense.dense.refills < dense.dense.steps / 2
    assert dense.dense.carried >= 3        # arrivals and finishes kept the other rows' buffers (moved when needed)
    # arrivals past the buffers' rows grew them with the held rows copied: only the first step read the pool whole
    assert dense.dense.refills == 1
    assert dense.dense.key is None and dense.dense.k_t              # idle: no batch held, the buffers kept for the next


def growing_traffic(eng: Engine) -> list[Collector]:
    """Ten requests arriving one every two steps, each crossing 128 tokens while the others run: the buffers grow in
    rows (past 8) and in length (past 128) while holding a live batch."""
    cols = [Collector() for _ in range(10)]
    for i, c in enumerate(cols):
        eng.submit(f"g{i}", list(range(4 + i, 104 + 3 * i)), SamplingParams(
            temperature=0, max_tokens=40 + 2 * i, ignore_eos=True, logprobs=True, top_logprobs=2), c)
        for _ in range(2):
            eng._drain_inbox()
            eng.step()
    eng.run_until_idle()
    return cols


def test_buffers_that_grow_under_a_live_batch_keep_its_rows_exactly(llama_ckpt):
    gather = make_engine(llama_ckpt, prefix_cache=False)
    gather.dense = None
    dense = make_engine(llama_ckpt, prefix_cache=False)
    assert dense.dense is not None
    want, got = growing_traffic(gather), growing_traffic(dense)
    for w, g in zip(want, got):
        assert g.error is None and len(g.tokens) == len(w.tokens) > 0
        assert [(c.token_id, c.logprob, c.top) for c in g.choices] == [(c.token_id, c.logprob, c.top)
                                                                          for c in w.choices]
    assert dense.dense.rows >= 10 and dense.dense.cap > 128   # it did grow both ways
    assert dense.dense.refills == 1                           # without reading the batch back from the pool


def test_a_steady_batch_fills_the_buffers_once(llama_ckpt):
    eng = make_engine(llama_ckpt)
    cols = [Collector() for _ in range(4)]
    for i, c in enumerate(cols):
        eng.submit(f"r{i}", list(range(3, 20 + i)), SamplingParams(temperature=0, max_tokens=30, ignore_eos=True), c)
    eng.run_until_idle()
    assert eng.dense is not None and eng.dense.steps == 29 and eng.dense.refills == 1


def test_a_serving_engine_frees_the_buffers_once_idle_a_while(llama_ckpt, monkeypatch):
    """Between two requests the buffers are kept (no allocation per burst); an engine left idle gives them back."""
    monkeypatch.setattr(engine_module, "IDLE_RELEASE_S", 0.05)
    eng = make_engine(llama_ckpt)
    assert eng.dense is not None
    cols = [Collector() for _ in range(3)]
    eng.start()
    try:
        for i, c in enumerate(cols):
            eng.submit(f"r{i}", list(range(3, 12 + i)), SamplingParams(temperature=0, max_tokens=8, ignore_eos=True), c)
        deadline = time.monotonic() + 30
        while not all(c.finish or c.error for c in cols) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(c.finish is not None and len(c.tokens) == 8 for c in cols)
        deadline = time.monotonic() + 10
        while eng.dense.k_t and time.monotonic() < deadline:
            time.sleep(0.01)
        assert eng.dense.steps > 0 and eng.dense.k_t == [] and eng.dense.rows == 0
    finally:
        eng.stop()


def test_buffers_stay_within_their_byte_cap():
    """Rows round up to ROW_STEP only while the cap allows; a batch too large even unrounded takes the page gather."""
    import torch

    from reference_engine.dense_kv import ROW_STEP, DenseKV

    per_row = 2 * 1 * 2 * 4 * 16 * torch.empty((), dtype=torch.float32).element_size()
    dense = DenseKV(num_layers=1, num_kv_heads=2, head_dim=4, dtype=torch.float32, max_bytes=3 * per_row)
    assert dense.begin_step(("a", "b"), 16) and dense.rows == 2     # rounding up to ROW_STEP would pass the cap
    dense.finish_step()
    assert not dense.begin_step(("a", "b", "c", "d"), 16)                      # 4 rows do not fit at all
    assert dense.k_t == [] and dense.rows == 0
    roomy = DenseKV(num_layers=1, num_kv_heads=2, head_dim=4, dtype=torch.float32, max_bytes=64 * per_row)
    assert roomy.begin_step(("a", "b"), 16) and roomy.rows == ROW_STEP


def test_buffers_shrink_to_the_batch_when_its_longest_request_leaves(llama_ckpt):
    """The buffers are exactly as long as the batch's padded length (a longer buffer is read with a gap after every
    row, which halves the speed of reading it from memory); when the longest request finishes they are re-laid out
    shorter, with the remaining rows copied across (no refill), and every token and logprob stays what the page
    gather gives."""
    def shrinking_traffic(eng: Engine) -> tuple[list[Collector], list[int]]:
        cols = [Collector() for _ in range(3)]
        lens = [(70, 4), (9, 30), (12, 30)]                # the longest prompt stops first
        for i, ((n, new), c) in enumerate(zip(lens, cols)):
            eng.submit(f"s{i}", list(range(3 + i, 3 + i + n)), SamplingParams(
                temperature=0, max_tokens=new, ignore_eos=True, logprobs=True, top_logprobs=2), c)
        caps = []
        eng._drain_inbox()
        while eng.scheduler.has_work():
            eng.step()
            caps.append(eng.dense.cap if eng.dense is not None else 0)
        return cols, caps

    gather = make_engine(llama_ckpt, prefix_cache=False)
    gather.dense = None
    dense = make_engine(llama_ckpt, prefix_cache=False)
    want, _ = shrinking_traffic(gather)
    got, caps = shrinking_traffic(dense)
    for w, g in zip(want, got):
        assert g.error is None and len(g.tokens) == len(w.tokens) > 0
        assert [(c.token_id, c.logprob, c.top) for c in g.choices] == [(c.token_id, c.logprob, c.top)
                                                                          for c in w.choices]
    page = dense.pool.page_size
    assert caps[1] >= 70 and caps[1] % page == 0          # as long as the longest request's pages, no longer
    assert min(c for c in caps if c) < caps[1]            # and shorter once it left
    assert dense.dense is not None and dense.dense.refills == 1
