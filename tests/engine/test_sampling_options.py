"""Sampling options other servers accept (issue #39): OpenAI's `logit_bias`, vLLM's `top_k` / `min_p` /
`repetition_penalty`, metadata that changes nothing, fields refused with their reason, and content parts that are
not text. Over HTTP against the real server on loopback (a tiny random model, greedy unless said), plus the
formulas on crafted logits."""

from __future__ import annotations

import httpx
import openai
import pytest
import torch

from reference_engine.launch import start_server
from reference_engine.protocol import METADATA_FIELDS, REFUSED_FIELDS
from reference_engine.sampler import sample
from reference_engine.sequence import SamplingParams, Sequence

MSG = [{"role": "user", "content": "hello there"}]
N = 12


@pytest.fixture(scope="module")
def srv(ckpt_factory):
    with start_server(ckpt_factory("llama"), weights="fp32", kv_dtype="fp32", threads=1,
                      served_model_name="tiny-llama") as s:
        yield s


def _post(s, body: dict, path: str = "/chat/completions") -> httpx.Response:
    return httpx.post(s.base_url + path, json={"model": s.model, **body}, timeout=60)


def _error(r: httpx.Response) -> dict:
    assert r.status_code == 400, r.text
    return r.json()["error"]


def _reply(s, **kw) -> tuple[list[bytes], list[float]]:
    """Token bytes and their logprobs of one chat completion (ignore_eos, so every reply has N tokens)."""
    body = {"messages": MSG, "max_tokens": N, "logprobs": True, "ignore_eos": True, **kw}
    r = _post(s, body)
    assert r.status_code == 200, r.text
    content = r.json()["choices"][0]["logprobs"]["content"]
    return [bytes(t["bytes"]) for t in content], [t["logprob"] for t in content]


def _ids_of(s, token: bytes) -> list[int]:
    tok = s.engine.tokenizer
    return [i for i in range(tok.vocab_size) if tok.token_bytes(i) == token]


# ---- logit_bias (OpenAI) ------------------------------------------------------------------------------------------
def test_logit_bias_minus_100_bans_the_greedy_token_and_plus_100_forces_one(srv):
    plain, _ = _reply(srv, temperature=0)
    first = _ids_of(srv, plain[0])
    banned, _ = _reply(srv, temperature=0, logit_bias={str(i): -100 for i in first})
    assert banned[0] != plain[0]                                  # the greedy first token can no longer be chosen
    assert plain[0] not in banned
    forced_id = srv.engine.tokenizer.encode("zebra")[0]
    forced = srv.engine.tokenizer.token_bytes(forced_id)
    assert forced not in plain
    out, _ = _reply(srv, temperature=0, logit_bias={str(forced_id): 100})
    assert out == [forced] * N                                    # every step, greedy
    out, _ = _reply(srv, temperature=1.0, seed=7, logit_bias={str(forced_id): 100})
    assert out == [forced] * N                                    # and sampled: +100 leaves nothing else
    small, _ = _reply(srv, temperature=0, logit_bias={str(forced_id): 0.01})
    assert small == plain                                         # a small bias need not change anything


def test_logit_bias_bad_values_are_400_naming_the_field(srv):
    err = _error(_post(srv, {"messages": MSG, "logit_bias": {"5": 101}}))
    assert err["param"] == "logit_bias.5" and "[-100, 100]" in err["message"]
    err = _error(_post(srv, {"messages": MSG, "logit_bias": {"hello": 1}}))
    assert err["param"] == "logit_bias" and "'hello' is not a token id" in err["message"]
    err = _error(_post(srv, {"messages": MSG, "logit_bias": {"99999999": 1}}))
    assert err["param"] == "logit_bias" and "outside the vocabulary" in err["message"]


# ---- top_k, min_p (vLLM) ------------------------------------------------------------------------------------------
def test_top_k_1_and_min_p_1_equal_greedy_under_sampling(srv):
    greedy, _ = _reply(srv, temperature=0)
    sampled = [_reply(srv, temperature=1.5, seed=seed)[0] for seed in range(3)]
    assert any(s != greedy for s in sampled)                      # sampling alone does leave the greedy path
    for seed in range(3):
        assert _reply(srv, temperature=1.5, seed=seed, top_k=1)[0] == greedy
        assert _reply(srv, temperature=1.5, seed=seed, min_p=1.0)[0] == greedy
    # -1 and 0 mean "all tokens" (vLLM): the same draw as without top_k
    assert _reply(srv, temperature=1.5, seed=0, top_k=-1)[0] == sampled[0] == _reply(srv, temperature=1.5, seed=0,
                                                                                       top_k=0)[0]
    err = _error(_post(srv, {"messages": MSG, "top_k": -2}))
    assert err["param"] == "top_k"
    err = _error(_post(srv, {"messages": MSG, "min_p": 1.5}))
    assert err["param"] == "min_p"


def _seq(prompt: list[int], output: list[int], **kw) -> Sequence:
    seq = Sequence(list(prompt), SamplingParams(max_tokens=10, **kw))
    seq.output_ids = list(output)
    seq.generator = torch.Generator().manual_seed(0)
    return seq


def _drawn(logits: torch.Tensor, n: int = 400, **kw) -> set[int]:
    seq = _seq([1], [], temperature=1.0, **kw)
    return {sample(logits, [seq])[0].token_id for _ in range(n)}


def test_top_k_and_min_p_keep_the_tokens_vllm_keeps():
    """probabilities 0.4, 0.3, 0.2, 0.1: top_k=2 keeps {0, 1}; min_p=0.6 keeps those >= 0.24, i.e. {0, 1}; min_p=0.4
    keeps >= 0.16, i.e. {0, 1, 2}; without either all four are drawn."""
    logits = torch.tensor([[0.4, 0.3, 0.2, 0.1]]).log()
    assert _drawn(logits) == {0, 1, 2, 3}
    assert _drawn(logits, top_k=2) == {0, 1}
    assert _drawn(logits, min_p=0.6) == {0, 1}
    assert _drawn(logits, min_p=0.4) == {0, 1, 2}
    assert _drawn(logits, top_k=3, min_p=0.6) == {0, 1}


# ---- repetition_penalty (vLLM) ------------------------------------------------------------------------------------
def test_repetition_penalty_follows_vllms_formula():
    """Every token already in the prompt or the output: a positive logit is divided by the penalty, a negative one
    multiplied; others are untouched. Reported logprobs stay the raw distribution's."""
    logits = torch.tensor([[2.0, 1.5, -1.0, -1.2, 0.0]])
    assert sample(logits, [_seq([7], [], temperature=0.0)])[0].token_id == 0
    assert sample(logits, [_seq([0], [], temperature=0.0, repetition_penalty=1.2)])[0].token_id == 0   # 1.67 > 1.5
    assert sample(logits, [_seq([0], [], temperature=0.0, repetition_penalty=1.4)])[0].token_id == 1   # 1.43 < 1.5
    assert sample(logits, [_seq([3], [0], temperature=0.0, repetition_penalty=1.4)])[0].token_id == 1  # output too
    # all positive ones seen: 0 -> 2/4, 1 -> 1.5/4, 4 (zero logit) stays 0: 0.5 wins
    assert sample(logits, [_seq([0, 1, 4], [], temperature=0.0, repetition_penalty=4.0)])[0].token_id == 0
    # negative logits move away from zero: token 2 (-1.0 -> -2.0) falls below token 3 (-1.2, unseen)
    only_neg = torch.tensor([[-1.0, -1.2]])
    assert sample(only_neg, [_seq([0], [], temperature=0.0, repetition_penalty=2.0)])[0].token_id == 1
    ch = sample(logits, [_seq([0], [], temperature=0.0, repetition_penalty=1.4)])[0]
    assert ch.logprob == pytest.approx(float(torch.log_softmax(logits[0], -1)[1]))


def test_repetition_penalty_changes_a_greedy_completion(srv):
    plain, _ = _reply(srv, temperature=0, max_tokens=48)
    assert len(set(plain)) < len(plain) - 4                       # a repetitive baseline, so the effect can show
    assert len(set(_reply(srv, temperature=0, max_tokens=48, repetition_penalty=3.0)[0])) > len(set(plain))
    assert _reply(srv, temperature=0, max_tokens=48, repetition_penalty=1.0)[0] == plain
    err = _error(_post(srv, {"messages": MSG, "repetition_penalty": 0}))
    assert err["param"] == "repetition_penalty"


# ---- metadata: accepted, changes nothing --------------------------------------------------------------------------
def test_metadata_fields_are_accepted_and_change_nothing(srv):
    plain = _reply(srv, temperature=0)
    meta = {"store": True, "metadata": {"team": "eval"}, "service_tier": "auto",
            "provider": {"order": ["x"], "allow_fallbacks": False}, "user": "user-123"}
    assert set(meta) == set(METADATA_FIELDS)
    assert _reply(srv, temperature=0, **meta) == plain           # same tokens, same logprobs
    c = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)
    r = c.chat.completions.create(model=srv.model, messages=MSG, max_tokens=N, temperature=0, store=True,
                                  metadata={"team": "eval"}, service_tier="auto", user="u",
                                  extra_body={"provider": {"order": ["x"]}, "ignore_eos": True})
    text = _post(srv, {"messages": MSG, "max_tokens": N, "temperature": 0, "ignore_eos": True}).json()
    assert r.choices[0].message.content == text["choices"][0]["message"]["content"]


# ---- refused fields, content parts ----------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value", [("reasoning_effort", "low"), ("functions", [{"name": "f"}]),
                                          ("function_call", "auto"), ("modalities", ["text", "audio"]),
                                          ("prediction", {"type": "content", "content": "x"}),
                                          ("use_beam_search", True)])
def test_unimplemented_fields_are_400_naming_the_field_and_why(srv, field, value):
    err = _error(_post(srv, {"messages": MSG, "max_tokens": 1, field: value}))
    assert err["param"] == field
    assert err["message"] == f"Unsupported request argument '{field}': {REFUSED_FIELDS[field]}"


def test_image_and_unknown_content_parts_are_400_not_dropped(srv):
    text = {"type": "text", "text": "what is this?"}
    ok = _post(srv, {"messages": [{"role": "user", "content": [text, text]}], "max_tokens": 1})
    assert ok.status_code == 200, ok.text
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    err = _error(_post(srv, {"messages": [{"role": "user", "content": [text, image]}], "max_tokens": 1}))
    assert err["param"] == "messages.0.content.1.type" and "reads text only" in err["message"]
    err = _error(_post(srv, {"messages": [MSG[0], {"role": "user", "content": [{"type": "hologram"}]}]}))
    assert err["param"] == "messages.1.content.0.type" and "unknown content part type" in err["message"]
    err = _error(_post(srv, {"messages": [{"role": "user", "content": [{"type": "text"}]}]}))
    assert err["param"] == "messages.0.content.0.text"
