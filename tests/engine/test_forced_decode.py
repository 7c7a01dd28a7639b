"""Teacher-forced DECODE (reference_engine.forced): a given continuation through the engine's decode step."""

from __future__ import annotations

import base64

import httpx
import numpy as np
import pytest
import torch

from reference_engine.engine import DistributionEvent
from reference_engine.launch import start_server
from reference_engine.sequence import SamplingParams
from tests.engine.conftest import Collector, greedy, make_engine

PROMPT = list(range(5, 40))


@pytest.fixture(scope="module")
def rand_srv(ckpt_factory):
    with start_server(ckpt_factory("llama"), weights="fp32", kv_dtype="fp32", threads=1,
                      served_model_name="tiny-llama") as srv:
        yield srv


def forced(eng, prompt: list[int], cont: list[int], rid: str = "f") -> tuple[torch.Tensor, Collector]:
    c = Collector()
    eng.submit(rid, prompt, SamplingParams(temperature=0.0, max_tokens=len(cont), ignore_eos=True,
                                           forced_tokens=tuple(cont)), c)
    eng.run_until_idle()
    assert c.error is None and c.tokens == cont
    rows = [e for e in c.events if isinstance(e, DistributionEvent)]
    assert len(rows) == 1
    return rows[0].logprobs, c


def prefill_rows(eng, prompt: list[int], cont: list[int]) -> torch.Tensor:
    c = Collector()
    eng.submit("p", prompt + cont, SamplingParams(temperature=0.0, max_tokens=0, full_distribution_from=len(prompt)), c)
    eng.run_until_idle()
    return next(e for e in c.events if isinstance(e, DistributionEvent)).logprobs


def own_greedy(eng, prompt: list[int], n: int) -> Collector:
    c = Collector()
    eng.submit("g", prompt, greedy(n, logprobs=True), c)
    eng.run_until_idle()
    return c


def test_bf16_forced_decode_equals_prefill_distributions(llama_ckpt):
    """With bf16 weights and bf16 KV, decode computes what prefill computes: every row agrees to bf16 tolerance."""
    eng = make_engine(llama_ckpt, weights="bf16", kv_dtype="bf16", page_size=8)
    cont = [7, 300, 12, 99, 5, 41, 41, 8, 200, 3, 17, 64]          # crosses page boundaries (page_size 8)
    dec = forced(eng, PROMPT, cont)[0]
    pre = prefill_rows(eng, PROMPT, cont)
    assert dec.dtype == torch.float32 and dec.shape == pre.shape == (len(cont), eng.model_config.vocab_size)
    assert torch.allclose(dec[0], pre[0], atol=1e-5)                # first row: the prompt's prefill, both ways
    assert (dec - pre).abs().max() < 5e-2
    assert torch.allclose(dec.exp().sum(-1), torch.ones(len(cont)), atol=1e-4)


def test_int4_decode_weights_move_the_forced_decode_rows_only(llama_ckpt):
    cont = [7, 300, 12, 99, 5, 41, 41, 8]
    bf = make_engine(llama_ckpt, weights="bf16", kv_dtype="bf16")
    i4 = make_engine(llama_ckpt, weights="bf16", decode_weights="int4", kv_dtype="bf16")
    d_bf, d_i4 = forced(bf, PROMPT, cont)[0], forced(i4, PROMPT, cont)[0]
    p_bf, p_i4 = prefill_rows(bf, PROMPT, cont), prefill_rows(i4, PROMPT, cont)
    assert torch.allclose(p_bf, p_i4)                                 # prefill cannot see INT4 decode weights
    assert torch.allclose(d_bf[0], d_i4[0], atol=1e-5)                # the first row is the prompt's prefill
    noise = (d_bf - p_bf).abs().max()                                 # bf16 decode-vs-prefill numerics
    assert (d_i4[1:] - d_bf[1:]).abs().max() > 10 * noise             # every later row went through INT4 decode
    kl = (d_bf[1:].exp() * (d_bf[1:] - d_i4[1:])).sum(-1)
    assert (kl > 0).all()


def test_fp8_kv_moves_the_forced_decode_rows(llama_ckpt):
    cont = [7, 300, 12, 99, 5, 41]
    d_bf = forced(make_engine(llama_ckpt, weights="bf16", kv_dtype="bf16"), PROMPT, cont)[0]
    d_f8 = forced(make_engine(llama_ckpt, weights="bf16", kv_dtype="fp8"), PROMPT, cont)[0]
    assert torch.allclose(d_bf[0], d_f8[0], atol=1e-5) and (d_f8[1:] - d_bf[1:]).abs().max() > 1e-3


@pytest.mark.parametrize("kw", [dict(weights="bf16", kv_dtype="bf16"),
                                dict(weights="bf16", decode_weights="int4", kv_dtype="fp8")])
def test_forcing_the_models_own_greedy_tokens_is_greedy_generation(llama_ckpt, kw):
    g = own_greedy(make_engine(llama_ckpt, **kw), PROMPT, 10)
    rows, c = forced(make_engine(llama_ckpt, **kw), PROMPT, g.tokens)   # a fresh engine: no prefix-cache hit
    assert rows.argmax(-1).tolist() == g.tokens
    assert [ch.logprob for ch in c.choices] == [ch.logprob for ch in g.choices]   # bit for bit: the same steps
    assert c.finish is not None and c.finish.completion_tokens == 10


def test_forced_decode_checks_page_tags(llama_ckpt):
    eng = make_engine(llama_ckpt, page_size=8, allow_fault_injection=True)
    before = eng.metrics.snapshot().get("kv_tag_checks", 0)
    forced(eng, PROMPT, [7, 8, 9, 10, 11], "ok")
    assert eng.metrics.snapshot()["kv_tag_checks"] - before >= 4          # every decode step checked its pages
    c = Collector()
    eng.submit("bad", PROMPT, SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True,
                                             forced_tokens=tuple(range(50, 62))), c)
    eng.step()
    eng.step()
    eng.inject_fault("bad")
    eng.run_until_idle()
    assert c.error is not None and c.error.type == "kv_integrity_error"
    assert not any(isinstance(e, DistributionEvent) for e in c.events)


def test_forced_tokens_must_match_max_tokens_and_vocabulary(llama_ckpt):
    from reference_engine.engine import RequestRejected

    eng = make_engine(llama_ckpt)
    with pytest.raises(RequestRejected, match="forced tokens"):
        eng.submit("x", PROMPT, SamplingParams(max_tokens=2, forced_tokens=(1,)), Collector())
    with pytest.raises(RequestRejected, match="forced tokens"):
        eng.submit("x", PROMPT, SamplingParams(max_tokens=1, forced_tokens=(10**7,)), Collector())


def test_http_forced_decode_rows_and_errors(rand_srv):
    url = rand_srv.base_url + "/x/distributions"
    pre = httpx.post(url, json={"prompt_token_ids": PROMPT + [7, 300, 12], "start": len(PROMPT)}).json()
    dec = httpx.post(url, json={"prompt_token_ids": PROMPT, "forced_token_ids": [7, 300, 12]}).json()
    assert dec["path"] == "decode" and pre["path"] == "prefill"
    assert dec["shape"] == pre["shape"] == [3, dec["vocab_size"]] and dec["token_ids"] == PROMPT + [7, 300, 12]
    rows = {k: np.frombuffer(base64.b64decode(d["logprobs_b64"]), dtype="<f4").reshape(d["shape"])
            for k, d in (("pre", pre), ("dec", dec))}
    assert np.abs(rows["pre"] - rows["dec"]).max() < 1e-4                 # fp32 weights and KV
    r = httpx.post(url, json={"prompt_token_ids": PROMPT, "forced_token_ids": [7], "start": 2})
    assert r.status_code == 400 and r.json()["error"]["param"] == "start"
    r = httpx.post(url, json={"prompt_token_ids": PROMPT, "forced_token_ids": [7, -1]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "forced_token_ids.1"
    r = httpx.post(url, json={"prompt_token_ids": PROMPT, "forced_token_ids": []})
    assert r.status_code == 400 and "forced_token_ids" in r.json()["error"]["message"]


@pytest.mark.parametrize("kw", [{}, {"kv_dtype": "fp8"}, {"decode_weights": "int4"}],
                         ids=["bf16", "fp8-kv", "int4-decode"])
def test_a_requests_decode_rows_do_not_depend_on_its_batch_mates(llama_ckpt, kw):
    """The exact KL must not depend on which requests shared a decode step (load, timing, how many cases ran at
    once): one request's teacher-forced rows alone, beside one or two others, and among seven are the same bits.
    What broke it: a one-row step took the page gather's transposed-K layout (another matmul kernel), and MKL's
    fp32 GEMM rounds 1-3 rows differently from 4+ (reference_engine/model.py, BATCH_INVARIANT_ROWS). Prefix caching
    is off here: a cached prefix is read back from the pool's precision, which is another matter."""
    g = torch.Generator().manual_seed(3)
    lengths = zip(torch.randint(5, 60, (7,), generator=g).tolist(), torch.randint(3, 25, (7,), generator=g).tolist())
    jobs = [(torch.randint(5, 250, (n,), generator=g).tolist(), torch.randint(5, 250, (m,), generator=g).tolist())
            for n, m in lengths]
    eng = make_engine(llama_ckpt, weights="bf16", prefix_cache=False, **kw)

    def rows_of(batch: list[int], plain: int = 0) -> dict[int, torch.Tensor]:
        """The rows of ``batch``'s requests, submitted at once with ``plain`` unmeasured greedy requests."""
        for j in range(plain):
            eng.submit(f"plain{j}-{len(batch)}", jobs[j][0], greedy(8), Collector())
        sinks = {i: Collector() for i in batch}
        for i in batch:
            prompt, cont = jobs[i]
            eng.submit(f"r{i}-{len(batch)}", prompt, SamplingParams(temperature=0.0, max_tokens=len(cont),
                                                                   ignore_eos=True, forced_tokens=tuple(cont)),
                       sinks[i])
        eng.run_until_idle()
        return {i: next(e for e in s.events if isinstance(e, DistributionEvent)).logprobs for i, s in sinks.items()}

    together = rows_of(list(range(7)))
    for batch, plain in (([0], 0), ([1, 2], 0), ([3, 4, 5], 0), ([6], 0), ([6], 2)):
        for i, rows in rows_of(batch, plain).items():
            assert torch.equal(rows, together[i]), (batch, i, float((rows - together[i]).abs().max()))
