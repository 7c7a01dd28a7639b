"""OpenAI conformance where a client would notice, and the server under bad input (issue #31 §5, #32 §6):
model lookup, tool names, penalties, refused parameters, role `function`, body cap, tokenisation off the event loop,
out-of-range seeds, malformed chat_template_kwargs, and non-streamed requests aborted when their client leaves."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import openai
import pytest
import torch

from reference_engine.chat_template import render_chat
from reference_engine.launch import start_server
from reference_engine.sampler import sample
from reference_engine.sequence import SamplingParams, Sequence

CAP = 64 * 1024
MSG = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def srv(ckpt_factory):
    with start_server(ckpt_factory("llama"), weights="fp32", kv_dtype="fp32", threads=1, served_model_name="tiny-llama",
                      max_request_bytes=CAP) as s:
        yield s


def _client(s) -> openai.OpenAI:
    return openai.OpenAI(base_url=s.base_url, api_key="unused", max_retries=0)


def _post(s, body: dict, path: str = "/chat/completions") -> httpx.Response:
    return httpx.post(s.base_url + path, json={"model": s.model, **body}, timeout=60)


def _error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    return err


def test_model_lookup(srv):
    c = _client(srv)
    m = c.models.retrieve("tiny-llama")
    assert m.id == "tiny-llama" and m.object == "model"
    with pytest.raises(openai.NotFoundError) as e:
        c.models.retrieve("gpt-4o")
    assert e.value.body["code"] == "model_not_found" and "gpt-4o" in e.value.body["message"]


def _tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}


def test_tool_names_follow_openais_pattern(srv):
    ok = _post(srv, {"messages": MSG, "max_tokens": 1, "tools": [_tool("get-weather_2"), _tool("x" * 64)]})
    assert ok.status_code == 200, ok.text
    for i, bad in ((0, "get weather"), (1, "x" * 65), (1, "météo"), (0, "")):
        tools = [_tool(bad), _tool("fine")] if i == 0 else [_tool("fine"), _tool(bad)]
        err = _error(_post(srv, {"messages": MSG, "max_tokens": 1, "tools": tools}), 400)
        assert err["param"] == f"tools.{i}.function.name" and repr(bad[:80]) in err["message"]


def test_unknown_or_unimplemented_parameters_are_refused_not_ignored(srv):
    for field, value in (("frobnicate", 1), ("logprob", True), ("top_n", 5)):
        err = _error(_post(srv, {"messages": MSG, "max_tokens": 1, field: value}), 400)
        assert err["param"] == field and err["message"] == f"Unrecognized request argument supplied: {field}"
    # known fields this server does not implement: named, with the reason (tests/engine/test_sampling_options.py)
    err = _error(_post(srv, {"messages": MSG, "max_tokens": 1, "functions": []}), 400)
    assert err["param"] == "functions" and err["message"].startswith("Unsupported request argument 'functions': ")
    err = _error(_post(srv, {"messages": MSG, "stream": True, "stream_options": {"include_obfuscation": True}}), 400)
    assert err["param"] == "stream_options.include_obfuscation"
    strict = _tool("w")
    strict["function"]["strict"] = True
    err = _error(_post(srv, {"messages": MSG, "tools": [_tool("v"), strict]}), 400)
    assert err["param"] == "tools.1.function.strict"
    err = _error(_post(srv, {"prompt": "hi", "max_tokens": 1, "suffix": "x"}, "/completions"), 400)
    assert err["param"] == "suffix"
    err = _error(_post(srv, {"prompt": "hi", "start": 1, "top_k": 3}, "/x/distributions"), 400)
    assert err["param"] == "top_k"


# ---- penalties
# ---------------------------------------------------------------------------------------------------------
def _seq(output: list[int], **kw) -> Sequence:
    seq = Sequence([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=10, **kw))
    seq.output_ids = list(output)
    return seq


def test_penalties_follow_openais_formula():
    """logit[j] -= c[j] * frequency + (c[j] > 0) * presence, c counted over this completion's tokens only."""
    logits = torch.zeros(1, 8)
    logits[0, 5], logits[0, 6] = 3.0, 1.5                  # token 5 generated twice so far, token 6 never
    out = [5, 5, 2]
    assert sample(logits, [_seq(out)])[0].token_id == 5
    assert sample(logits, [_seq(out, frequency_penalty=0.7)])[0].token_id == 5     # 3 - 1.4 = 1.6 > 1.5
    assert sample(logits, [_seq(out, frequency_penalty=0.8)])[0].token_id == 6     # 3 - 1.6 = 1.4 < 1.5
    assert sample(logits, [_seq(out, presence_penalty=1.4)])[0].token_id == 5      # 1.6 > 1.5
    assert sample(logits, [_seq(out, presence_penalty=1.6)])[0].token_id == 6
    assert sample(logits, [_seq(out, frequency_penalty=-1.0, presence_penalty=2.0)])[0].token_id == 5   # 3 + 2 - 2
    assert sample(logits, [_seq([], presence_penalty=2.0)])[0].token_id == 5          # the prompt does not count
    # reported logprobs stay those of the raw distribution
    ch = sample(logits, [_seq(out, presence_penalty=1.6)])[0]
    assert ch.logprob == pytest.approx(float(torch.log_softmax(logits[0], -1)[6]))


def test_penalties_change_a_greedy_completion(srv):
    """Over HTTP: a greedy completion of the random model repeats tokens; a frequency penalty makes it repeat less,
    a presence penalty too, and a negative one more."""
    def tokens(**kw) -> list[str]:
        r = _client(srv).chat.completions.create(model=srv.model, messages=MSG, temperature=0, max_tokens=48,
                                                 logprobs=True, extra_body={"ignore_eos": True}, **kw)
        return [t.token for t in r.choices[0].logprobs.content]

    plain = tokens()
    assert len(set(plain)) < len(plain) - 4                  # a repetitive baseline, so the effect can show
    assert len(set(tokens(frequency_penalty=2.0))) > len(set(plain))
    assert len(set(tokens(presence_penalty=2.0))) > len(set(plain))
    assert len(set(tokens(frequency_penalty=-2.0))) <= len(set(plain))
    err = _error(_post(srv, {"messages": MSG, "presence_penalty": 2.5}), 400)
    assert err["param"] == "presence_penalty"


# ---- role function
# -------------------------------------------------------------------------------------------------------
FN_HISTORY = [{"role": "user", "content": "weather?"},
              {"role": "assistant", "content": None,
               "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]}]


def test_role_function_is_a_tool_result_with_its_name(srv):
    template = "{% for m in messages %}[{{ m.role }}:{{ m.name or '' }}:{{ m.content }}]{% endfor %}"
    text = render_chat(template, FN_HISTORY + [{"role": "function", "name": "w", "content": "sunny"}])
    assert text.endswith("[tool:w:sunny]")
    r = _post(srv, {"messages": FN_HISTORY + [{"role": "function", "name": "w", "content": "sunny"}], "max_tokens": 2})
    assert r.status_code == 200, r.text
    err = _error(_post(srv, {"messages": FN_HISTORY + [{"role": "function", "content": "sunny"}]}), 400)
    assert err["param"] == "messages.2.name"


# ---- bad input
# ---------------------------------------------------------------------------------------------------------
def test_request_bodies_have_a_size_cap(srv):
    big = {"model": srv.model, "messages": [{"role": "user", "content": "x" * (CAP + 10)}]}
    err = _error(httpx.post(srv.base_url + "/chat/completions", json=big), 413)
    assert err["code"] == "request_too_large" and str(CAP) in err["message"]

    def chunks():                                           # no Content-Length: counted while it arrives
        data = json.dumps(big).encode()
        for i in range(0, len(data), 8192):
            yield data[i:i + 8192]

    r = httpx.post(srv.base_url + "/completions", content=chunks(), headers={"content-type": "application/json"})
    assert _error(r, 413)["code"] == "request_too_large"
    assert _post(srv, {"messages": MSG, "max_tokens": 1}).status_code == 200       # still serving


def test_tokenisation_runs_off_the_event_loop(srv, monkeypatch):
    """While a slow tokenisation (made slow on purpose: 1.5 s) is in progress, /health answers at once."""
    tok = srv.engine.tokenizer
    real = tok.encode
    started = threading.Event()

    def slow(*a, **kw):
        started.set()
        time.sleep(1.5)
        return real(*a, **kw)

    monkeypatch.setattr(tok, "encode", slow)
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(r=_post(srv, {"messages": MSG, "max_tokens": 1})))
    t.start()
    assert started.wait(10)
    t0 = time.monotonic()
    assert httpx.get(srv.base_url[:-3] + "/health", timeout=5).status_code == 200
    assert time.monotonic() - t0 < 0.5
    t.join(30)
    assert result["r"].status_code == 200


def test_a_huge_prompt_is_refused_without_tokenising(srv):
    r = _post(srv, {"prompt": "word " * 12000, "max_tokens": 1}, "/completions")
    assert _error(r, 400)["code"] == "context_length_exceeded"


def test_seed_out_of_range_and_bad_template_kwargs_are_400(srv):
    for seed in (2 ** 64, 2 ** 63, -(2 ** 63) - 1):
        assert _error(_post(srv, {"messages": MSG, "max_tokens": 1, "seed": seed}), 400)["param"] == "seed"
    for seed in (2 ** 63 - 1, -(2 ** 63)):
        assert _post(srv, {"messages": MSG, "max_tokens": 1, "seed": seed, "temperature": 1}).status_code == 200
    for kwargs in ({"messages": []}, {"a-b": 1}, {"add_generation_prompt": False}, {"for": 1}):
        err = _error(_post(srv, {"messages": MSG, "max_tokens": 1, "chat_template_kwargs": kwargs}), 400)
        assert err["param"] == "chat_template_kwargs", err
    assert _error(_post(srv, {"messages": MSG, "chat_template_kwargs": [1]}), 400)["param"] == "chat_template_kwargs"
    assert _post(srv, {"messages": MSG, "max_tokens": 1, "chat_template_kwargs": {"enable_thinking": False}}
                 ).status_code == 200


def test_a_non_streamed_request_is_aborted_when_its_client_leaves(srv):
    eng = srv.engine
    before = eng.metrics.snapshot()
    body = json.dumps({"model": srv.model, "messages": MSG, "max_tokens": 1500, "temperature": 0,
                       "ignore_eos": True}).encode()
    sock = socket.create_connection((srv.host, srv.port))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    deadline = time.monotonic() + 10
    while not eng.scheduler.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert eng.scheduler.running, "the request never started"
    sock.close()
    deadline = time.monotonic() + 5
    while (eng.scheduler.running or eng.scheduler.waiting) and time.monotonic() < deadline:
        time.sleep(0.02)
    after = eng.metrics.snapshot()
    assert not eng.scheduler.running and not eng.scheduler.waiting
    assert after["requests_aborted"] == before["requests_aborted"] + 1
    assert after["requests_finished"] == before["requests_finished"]       # it did not just run to its end
    assert after["generation_tokens"] - before["generation_tokens"] < 1500


def test_parallel_tool_calls_false_gives_one_call(tmp_path):
    """A scripted model that writes call after call: with parallel_tool_calls false, generation ends at the first
    closing tag (one call); without it, every completed call is returned."""
    from reference_engine.tiny_checkpoint import ASSISTANT_START, build_scripted_checkpoint

    call = '{"name": "w", "arguments": {"city": "Oslo"}}'
    path = build_scripted_checkpoint(tmp_path / "loop", [[ASSISTANT_START, "<tool_call>", call, "</tool_call>",
                                                          "<tool_call>"]])
    tools = [_tool("w")]
    with start_server(path, weights="fp32", kv_dtype="fp32", threads=1) as s:
        c = _client(s)
        many = c.chat.completions.create(model=s.model, messages=MSG, tools=tools, temperature=0, max_tokens=7)
        one = c.chat.completions.create(model=s.model, messages=MSG, tools=tools, temperature=0, max_tokens=7,
                                        parallel_tool_calls=False)
    assert len(many.choices[0].message.tool_calls) == 2
    (only,) = one.choices[0].message.tool_calls
    assert json.loads(only.function.arguments) == {"city": "Oslo"} and one.choices[0].finish_reason == "tool_calls"
    assert one.usage.completion_tokens == 3
