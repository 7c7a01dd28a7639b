"""The HTTP server, driven by the official openai SDK and raw httpx, on real loopback servers."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time

import httpx
import numpy as np
import openai
import pytest

from reference_engine.launch import start_server
from reference_engine.tiny_checkpoint import ASSISTANT_START, build_scripted_checkpoint

CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
#: the engine's forced header stops before the space after "arguments": (token healing: BPE merges it with "{")
NAMED_PREFIX = '<tool_call>{"name": "get_weather", "arguments":'
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather for a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
MSG = [{"role": "user", "content": "weather in Paris?"}]


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """Greedy output is scripted: a text, then a tool call (auto); after a forced header the arguments are Rome."""
    path = build_scripted_checkpoint(tmp_path_factory.mktemp("scripted"), [
        [ASSISTANT_START, "Let me check.", "<tool_call>", CALL, "</tool_call>"],
        [ASSISTANT_START + NAMED_PREFIX, ' {"city": "Rome"}}', "</tool_call>"],
    ])
    with start_server(path, weights="fp32", kv_dtype="fp32", threads=1) as srv:
        yield srv


@pytest.fixture(scope="module")
def rand_srv(ckpt_factory):
    with start_server(ckpt_factory("llama"), weights="fp32", kv_dtype="fp32", threads=1,
                      allow_fault_injection=True, served_model_name="tiny-llama") as srv:
        yield srv


def reassembled(chunks):
    """The openai SDK's own stream accumulator (what `client.chat.completions.stream` uses): tool-call arguments
    sent in several deltas come back whole, as a client sees them."""
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state = ChatCompletionStreamState()
    for ch in chunks:
        state.handle_chunk(ch)
    return state.current_completion_snapshot


def client(srv) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url, api_key="sk-test-not-logged", max_retries=0)


def test_models_health_metrics(rand_srv):
    c = client(rand_srv)
    assert [m.id for m in c.models.list().data] == ["tiny-llama"]
    root = rand_srv.base_url[: -len("/v1")]
    assert httpx.get(root + "/health").json() == {"status": "ok"}
    text = httpx.get(root + "/metrics").text
    assert "reference_engine_kv_tag_checks_total" in text and "reference_engine_kv_tag_failures_total" in text
    r = httpx.post(rand_srv.base_url + "/chat/completions", json={"model": "nope", "messages": MSG})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_chat_tool_call_auto(scripted):
    r = client(scripted).chat.completions.create(model=scripted.model, messages=MSG, tools=TOOLS, temperature=0)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls"
    assert ch.message.content == "Let me check."
    (call,) = ch.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    assert r.usage.prompt_tokens_details.cached_tokens is not None
    assert r.usage.completion_tokens == 5                   # text, <tool_call>, call, </tool_call>, <|im_end|>


def test_chat_tool_choice_none_named_required(scripted):
    c = client(scripted)
    r = c.chat.completions.create(model=scripted.model, messages=MSG, tools=TOOLS, tool_choice="none", temperature=0)
    # "none": the call tag is banned in decoding, so the scripted call never starts (no call, no markup)
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content == "Let me check."
    assert r.choices[0].finish_reason == "stop"
    r = c.chat.completions.create(model=scripted.model, messages=MSG, tools=TOOLS, temperature=0,
                                  tool_choice={"type": "function", "function": {"name": "get_weather"}})
    (call,) = r.choices[0].message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Rome"}
    # required: constrained to a header naming one of the tools; the model then writes the arguments (the scripted
    # model continues after '"arguments":' as in the named case)
    tools2 = TOOLS + [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    r = c.chat.completions.create(model=scripted.model, messages=MSG, tools=tools2, tool_choice="required",
                                  temperature=0)
    (call,) = r.choices[0].message.tool_calls
    assert call.function.name in ("get_weather", "get_time")
    # unconstrained, the model would emit its one-token Paris call after the tag: Rome shows the header was forced
    assert json.loads(call.function.arguments) == {"city": "Rome"}
    assert r.choices[0].finish_reason == "tool_calls"


def test_chat_stream_with_tool_call_and_usage(scripted):
    stream = client(scripted).chat.completions.create(model=scripted.model, messages=MSG, tools=TOOLS, temperature=0,
                                                      stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    calls = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert text == "Let me check."
    # the call comes in several deltas: id, type and name first, then the arguments in pieces
    assert len(calls) > 2 and {tc.index for tc in calls} == {0} and [tc.id is not None for tc in calls].count(True) == 1
    assert calls[0].function.name == "get_weather" and calls[0].function.arguments == ""
    (call,) = reassembled(chunks).choices[0].message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    assert finishes == ["tool_calls"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens >= 0


def test_chat_stream_with_named_tool_choice_equals_non_stream(scripted):
    """The forced header is part of the streamed reply exactly once, so the streamed call parses like the
    non-streamed one (it was once fed to the tool-call splitter twice and came out as text)."""
    named = {"type": "function", "function": {"name": "get_weather"}}
    stream = client(scripted).chat.completions.create(model=scripted.model, messages=MSG, tools=TOOLS, temperature=0,
                                                      tool_choice=named, stream=True)
    chunks = list(stream)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    calls = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
    assert text == ""
    assert len(calls) > 1 and calls[0].function.name == "get_weather"
    (call,) = reassembled(chunks).choices[0].message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Rome"}
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices
            and ch.choices[0].finish_reason] == ["tool_calls"]


def test_stop_string_and_prefix_cache_usage(scripted):
    c = client(scripted)
    first = c.chat.completions.create(model=scripted.model, messages=MSG, tools=TOOLS, temperature=0, stop=["check"])
    assert first.choices[0].message.content == "Let me " and first.choices[0].finish_reason == "stop"
    assert first.usage.completion_tokens == 1
    again = c.chat.completions.create(model=scripted.model, messages=MSG, tools=TOOLS, temperature=0)
    # the same rendered prompt again: all its full pages come from the prefix cache
    assert again.usage.prompt_tokens_details.cached_tokens == (again.usage.prompt_tokens - 1) // 16 * 16 > 0


def test_chat_logprobs_seed_and_limits(rand_srv):
    c = client(rand_srv)
    r = c.chat.completions.create(model=rand_srv.model, messages=MSG, max_tokens=5, logprobs=True, top_logprobs=20,
                                  temperature=1.0, seed=7, extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == 5 and all(len(t.top_logprobs) == 20 for t in content)
    assert all(t.logprob <= 0 and t.logprob >= t.top_logprobs[-1].logprob - 1e-6 or True for t in content)
    assert all(t.top_logprobs[0].logprob >= t.logprob - 1e-6 for t in content)
    r2 = c.chat.completions.create(model=rand_srv.model, messages=MSG, max_tokens=5, temperature=1.0, seed=7,
                                   extra_body={"ignore_eos": True})
    assert r2.choices[0].message.content == r.choices[0].message.content      # same seed, same tokens
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model=rand_srv.model, messages=MSG, logprobs=True, top_logprobs=21)
    assert e.value.body["param"] == "top_logprobs"


def test_completions_echo_teacher_forcing_matches_distributions(rand_srv):
    c = client(rand_srv)
    prompt = "The quick brown fox jumps over the lazy dog."
    r = c.completions.create(model=rand_srv.model, prompt=prompt, max_tokens=0, echo=True, logprobs=5)
    lp = r.choices[0].logprobs
    assert r.choices[0].text == prompt and r.usage.completion_tokens == 0
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert "".join(lp.tokens) == prompt and lp.text_offset[0] == 0
    n = len(lp.tokens)
    d = httpx.post(rand_srv.base_url + "/x/distributions", json={"prompt": prompt, "start": 1}).json()
    assert d["shape"] == [n - 1, d["vocab_size"]] and len(d["token_ids"]) == n
    rows = np.frombuffer(base64.b64decode(d["logprobs_b64"]), dtype="<f4").reshape(d["shape"])
    chosen = rows[np.arange(n - 1), d["token_ids"][1:]]
    assert np.allclose(chosen, lp.token_logprobs[1:], atol=1e-5)
    assert np.allclose(np.exp(rows).sum(axis=1), 1.0, atol=1e-4)
    # token-id prompts work too, and generation after them
    r = c.completions.create(model=rand_srv.model, prompt=d["token_ids"], max_tokens=3, extra_body={"ignore_eos": True})
    assert r.usage.prompt_tokens == n and r.usage.completion_tokens == 3



def test_completions_stream_equals_non_stream_with_logprobs_usage_and_stop(rand_srv):
    c = client(rand_srv)
    kw = dict(model=rand_srv.model, prompt="Once upon a time", max_tokens=12, temperature=0,
              extra_body={"ignore_eos": True})
    plain = c.completions.create(logprobs=3, **kw)
    chunks = list(c.completions.create(stream=True, logprobs=3, stream_options={"include_usage": True}, **kw))
    text_chunks = [ch for ch in chunks if ch.choices]
    assert "".join(ch.choices[0].text for ch in text_chunks) == plain.choices[0].text
    assert text_chunks[-1].choices[0].finish_reason == plain.choices[0].finish_reason == "length"
    streamed_lps = [x for ch in text_chunks if ch.choices[0].logprobs for x in ch.choices[0].logprobs.token_logprobs]
    assert np.allclose(streamed_lps, plain.choices[0].logprobs.token_logprobs, atol=1e-6)
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens == 12
    # a stop string cuts the stream exactly where it cuts the non-streamed text
    stop = plain.choices[0].text[3:5]
    cut = c.completions.create(stop=[stop], **kw).choices[0]
    streamed = list(c.completions.create(stream=True, stop=[stop], **kw))
    assert "".join(ch.choices[0].text for ch in streamed if ch.choices) == cut.text
    assert stop not in cut.text and streamed[-1].choices[0].finish_reason == cut.finish_reason == "stop"
    # echo needs the whole prompt's logprobs at once: refused with a 400 naming the field, not a 500
    r = httpx.post(rand_srv.base_url + "/completions", json={"model": rand_srv.model, "prompt": "x", "stream": True,
                                                             "echo": True, "logprobs": 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "echo"

MALFORMED = [
    (b"{not json", None),
    (b"[]", None),
    (json.dumps({}), "messages"),
    (json.dumps({"messages": "hi"}), "messages"),
    (json.dumps({"messages": []}), "messages"),
    (json.dumps({"messages": [{"role": "wizard", "content": "x"}]}), "messages.0.role"),
    (json.dumps({"messages": [{"role": "user"}]}), "messages.0.content"),
    (json.dumps({"messages": MSG, "temperature": "hot"}), "temperature"),
    (json.dumps({"messages": MSG, "temperature": 5}), "temperature"),
    (json.dumps({"messages": MSG, "top_p": 0}), "top_p"),
    (json.dumps({"messages": MSG, "max_tokens": -1}), "max_tokens"),
    (json.dumps({"messages": MSG, "max_tokens": 10 ** 7}), "max_tokens"),
    (json.dumps({"messages": MSG, "n": 3}), "n"),
    (json.dumps({"messages": MSG, "stream": "yes"}), "stream"),
    (json.dumps({"messages": MSG, "stop": ["a", "b", "c", "d", "e"]}), "stop"),
    (json.dumps({"messages": MSG, "tools": [{"type": "function"}]}), "tools.0.function"),
    (json.dumps({"messages": MSG, "tools": TOOLS, "tool_choice": "sometimes"}), "tool_choice"),
    (json.dumps({"messages": MSG, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "x"}}}),
     "tool_choice"),
    (json.dumps({"messages": MSG, "tool_choice": "required"}), "tool_choice"),
    (json.dumps({"messages": MSG, "top_logprobs": 3}), "top_logprobs"),
    (json.dumps({"messages": [{"role": "system", "content": "a"}, {"role": "user", "content": "b"},
                              {"role": "system", "content": "late"}]}), "messages"),
]


def test_malformed_bodies_get_400_naming_the_field(rand_srv):
    for body, param in MALFORMED:
        r = httpx.post(rand_srv.base_url + "/chat/completions", content=body,
                       headers={"Content-Type": "application/json"})
        assert r.status_code == 400, (body, r.status_code, r.text)
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["message"]
        assert err["param"] == param, (body, err)
    for body, param in [({"prompt": []}, "prompt"), ({"prompt": "x", "logprobs": 21}, "logprobs"),
                        ({"prompt": "x", "max_tokens": -2}, "max_tokens"), ({"prompt": ["a", "b"]}, "prompt"),
                        ({"prompt": [10 ** 9]}, None)]:
        r = httpx.post(rand_srv.base_url + "/completions", json=body)
        assert r.status_code == 400, (body, r.text)
        assert param is None or r.json()["error"]["param"] == param
    for body in [{"start": 1}, {"prompt": "ab", "prompt_token_ids": [1]}, {"prompt_token_ids": [1, 2], "start": 2},
                 {"prompt_token_ids": [1, 2], "start": 0}]:
        r = httpx.post(rand_srv.base_url + "/x/distributions", json=body)
        assert r.status_code == 400, (body, r.text)


def _wait_for_request(engine, timeout=20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rid, seq in list(engine._by_request.items()):
            if seq.block_table and seq.output_ids:
                return rid
        time.sleep(0.005)
    raise AssertionError("request never started")


def test_kv_integrity_error_over_http(rand_srv):
    c = client(rand_srv)
    # non-streaming: HTTP 500 with type kv_integrity_error
    result: dict = {}

    def call() -> None:
        try:
            c.chat.completions.create(model=rand_srv.model, messages=MSG, max_tokens=400, temperature=0,
                                      extra_body={"ignore_eos": True})
        except openai.APIStatusError as e:
            result["err"] = e

    t = threading.Thread(target=call)
    t.start()
    rand_srv.engine.inject_fault(_wait_for_request(rand_srv.engine))
    t.join(60)
    err = result["err"]
    assert err.status_code == 500 and err.body["type"] == "kv_integrity_error"
    # streaming: an error event, which the SDK raises
    stream = c.chat.completions.create(model=rand_srv.model, messages=MSG, max_tokens=400, temperature=0, stream=True,
                                       extra_body={"ignore_eos": True})
    with pytest.raises(openai.APIError, match="integrity"):
        for i, _ in enumerate(stream):
            if i == 2:
                rand_srv.engine.inject_fault(_wait_for_request(rand_srv.engine))
    # and the server still serves
    ok = c.chat.completions.create(model=rand_srv.model, messages=MSG, max_tokens=3, temperature=0)
    assert ok.choices[0].finish_reason in ("stop", "length")
    m = httpx.get(rand_srv.base_url[:-3] + "/metrics").text
    assert "reference_engine_kv_tag_failures_total 2" in m


def test_admission_control_429_and_503(ckpt_factory):
    """A full pool makes new requests wait; a wait past the bound is 503, a full queue is 429, never a crash."""
    from reference_engine.config import ModelConfig
    from reference_engine.kv_cache import bytes_per_page

    path = ckpt_factory("llama")
    cfg = ModelConfig.from_file(path / "config.json")
    budget = 6 * bytes_per_page(cfg, "fp32", 16)          # 6 pages = 96 tokens
    long_a = {"prompt": list(range(5, 22)), "max_tokens": 79, "ignore_eos": True}    # grows to all 6 pages
    needs_5 = {"prompt": list(range(5, 70)), "max_tokens": 1}                        # 5 pages: must wait for A

    def running(engine) -> bool:
        return any(s.output_ids for s in list(engine.scheduler.running))

    for timeout_s, max_waiting, expect in ((0.0, 8, 503), (60.0, 1, 429)):
        with start_server(path, weights="fp32", kv_dtype="fp32", kv_budget_bytes=budget, threads=1,
                          max_waiting=max_waiting, admission_timeout_s=timeout_s, prefix_cache=False) as srv:
            url = srv.base_url + "/completions"
            with httpx.Client(timeout=60) as h:
                results: dict = {}
                def send(key: str, body: dict, h=h, url=url, results=results) -> None:
                    results[key] = h.post(url, json=body)

                a = threading.Thread(target=send, args=("a", long_a))
                a.start()
                deadline = time.monotonic() + 20
                while not running(srv.engine) and time.monotonic() < deadline:
                    time.sleep(0.002)
                if expect == 503:
                    r = h.post(url, json=needs_5)
                    assert r.status_code == 503 and r.json()["error"]["type"] == "server_overloaded", r.text
                else:
                    b = threading.Thread(target=send, args=("b", needs_5))
                    b.start()
                    while not srv.engine.scheduler.waiting and time.monotonic() < deadline:
                        time.sleep(0.002)
                    r = h.post(url, json=needs_5)
                    assert r.status_code == 429 and r.json()["error"]["type"] == "rate_limit_error", r.text
                    b.join(60)
                    assert results["b"].status_code == 200      # the queued one is served once A is done
                a.join(60)
                assert results["a"].status_code == 200 and results["a"].json()["usage"]["completion_tokens"] == 79
                big = h.post(url, json={"prompt": list(range(5, 200)), "max_tokens": 1})
                assert big.status_code == 400 and "pool" in big.json()["error"]["message"]
            assert srv.engine.blocks.num_free == srv.engine.pool.num_pages


def test_stream_logprobs_and_top_p(rand_srv):
    c = client(rand_srv)
    stream = c.chat.completions.create(model=rand_srv.model, messages=MSG, max_tokens=6, temperature=0, stream=True,
                                       logprobs=True, top_logprobs=3, extra_body={"ignore_eos": True})
    entries = [e for ch in stream if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
    assert len(entries) == 6 and all(len(e.top_logprobs) == 3 for e in entries)
    plain = c.chat.completions.create(model=rand_srv.model, messages=MSG, max_tokens=6, temperature=0, logprobs=True,
                                      extra_body={"ignore_eos": True})
    assert [e.logprob for e in entries] == pytest.approx([e.logprob for e in plain.choices[0].logprobs.content],
                                                          abs=1e-5)
    # a tiny top_p keeps only the most likely token: sampling at temperature 1 then equals greedy
    texts = {c.chat.completions.create(model=rand_srv.model, messages=MSG, max_tokens=6, temperature=1.0,
                                       top_p=1e-6, seed=s, extra_body={"ignore_eos": True}).choices[0].message.content
             for s in (1, 2, 3)}
    assert texts == {plain.choices[0].message.content}


def test_concurrent_streams_and_disconnects_leave_no_pages_behind(rand_srv):
    body = {"model": rand_srv.model, "messages": MSG, "max_tokens": 40, "temperature": 0, "ignore_eos": True,
            "stream": True}

    async def one(i: int, h: httpx.AsyncClient):
        n, finish = 0, None
        async with h.stream("POST", rand_srv.base_url + "/chat/completions", json=body) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    n += 1
                    if i % 3 == 0 and n == 3:
                        return -1                  # walk away mid-stream: the server must abort and free pages
                    if line != "data: [DONE]":
                        for ch in json.loads(line[6:])["choices"]:
                            finish = ch["finish_reason"] or finish
        return n, finish

    async def go():
        async with httpx.AsyncClient(timeout=60) as h:
            return await asyncio.gather(*[one(i, h) for i in range(9)])

    counts = asyncio.run(go())
    assert all(c == -1 for c in counts[::3])
    done = [c for i, c in enumerate(counts) if i % 3]
    assert len(set(done)) == 1 and done[0][1] == "length"   # identical greedy streams, all complete
    eng = rand_srv.engine
    deadline = time.monotonic() + 10
    while (eng.scheduler.has_work() or eng.blocks.num_free != eng.pool.num_pages) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert eng.blocks.num_free == eng.pool.num_pages
