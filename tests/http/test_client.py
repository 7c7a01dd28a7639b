"""EndpointClient against the real scripted HTTP server: retries, Retry-After, 4xx, streams, usage, wire issues."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from verifier.http.client import EndpointClient, EndpointError, request_hash
from verifier.http.parse import normalize_usage
from verifier.records import EndpointConfig
from verifier.testing import FaultInjector, Reply, schema_responder
from verifier.testing.replies import body_hash

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"]}}}
BODY = {"messages": [{"role": "user", "content": "weather in Paris?"}], "tools": [WEATHER]}


def cfg(url: str, **kw) -> EndpointConfig:
    return EndpointConfig(name="ep", base_url=url, model="scripted-model", **kw)


async def _chat(url: str, body=BODY, *, stream=False, client_kw=None, **kw):
    async with EndpointClient(cfg(url, **kw), backoff_base=0.001, **(client_kw or {})) as c:
        return await c.chat(body, stream=stream)


@pytest.mark.parametrize("stream", [False, True])
async def test_retries_429_then_succeeds_with_exact_attempts(scripted_server, stream):
    def responder(body, ctx):
        if ctx.attempt <= 2:
            return Reply.error(429, "slow down", retry_after=0)
        return Reply.tool_call("get_weather", {"city": "Paris"})

    srv = scripted_server(responder)
    ex = await _chat(srv.base_url, stream=stream)
    assert ex.ok and ex.attempts == 3 and ex.retried_statuses == [429, 429]
    assert ex.tool_calls[0].name == "get_weather" and json.loads(ex.tool_calls[0].arguments) == {"city": "Paris"}
    assert srv.request_count == 3


async def test_retry_after_is_honoured(scripted_server):
    def responder(body, ctx):
        return Reply.error(429, retry_after=0.4) if ctx.attempt == 1 else Reply.text("ok")

    srv = scripted_server(responder)
    t0 = time.perf_counter()
    ex = await _chat(srv.base_url)
    assert ex.ok and ex.attempts == 2
    assert time.perf_counter() - t0 >= 0.4  # backoff_base is 1 ms, so only Retry-After can explain the wait


async def test_gives_up_after_max_attempts_on_500(scripted_server):
    srv = scripted_server(lambda b, c: Reply.error(500, "boom"))
    ex = await _chat(srv.base_url, max_attempts=4)
    assert not ex.ok and ex.error_class == "server_error" and ex.status == 500
    assert ex.attempts == 4 and ex.retried_statuses == [500, 500, 500] and srv.request_count == 4


@pytest.mark.parametrize("status,cls",
                         [(400, "client_error"), (401, "auth"), (404, "not_found"), (422, "client_error")])
async def test_non_retryable_4xx_recorded_not_retried(scripted_server, status, cls):
    srv = scripted_server(lambda b, c: Reply.error(status, f"nope {status}"))
    ex = await _chat(srv.base_url)
    assert ex.attempts == 1 and srv.request_count == 1
    assert ex.status == status and ex.error_class == cls and ex.error_message == f"nope {status}"


async def test_truncated_stream_is_retried_as_broken_stream(scripted_server):
    def responder(body, ctx):
        r = Reply.tool_call("get_weather", {"city": "Paris"})
        if ctx.attempt == 1:
            r.truncate_after_chunks = 2
        return r

    srv = scripted_server(responder)
    ex = await _chat(srv.base_url, stream=True)
    assert ex.ok and ex.attempts == 2 and ex.retried_statuses == [0]
    ex1 = await _chat(srv.base_url, {**BODY, "temperature": 0.5}, stream=True, max_attempts=1)
    assert ex1.error_class == "broken_stream" and ex1.attempts == 1


async def test_connection_refused_is_classified_and_bounded():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ex = await _chat(f"http://127.0.0.1:{port}/v1", max_attempts=2)
    assert ex.error_class == "connection" and ex.attempts == 2 and ex.status is None


async def test_stream_reassembly_equals_non_stream(scripted_server):
    def responder(body, ctx):
        return Reply(content="Let me check both.", reasoning_content="two cities -> two calls",
                     tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}, "id": "call_a"},
                                 {"name": "get_weather", "arguments": '{"city": "Rome"}', "id": "call_b"}],
                     argument_pieces=5, logprobs=[{"token": "Let", "logprob": -0.1, "top_logprobs": []}])

    srv = scripted_server(responder)
    plain = await _chat(srv.base_url, stream=False)
    streamed = await _chat(srv.base_url, stream=True)
    assert streamed.stream and not plain.stream
    for field in ("content", "reasoning_content", "finish_reason", "logprobs"):
        assert getattr(streamed, field) == getattr(plain, field), field
    assert [t.model_dump() for t in streamed.tool_calls] == [t.model_dump() for t in plain.tool_calls]
    assert streamed.usage == plain.usage and streamed.usage.cached_tokens == 0
    assert streamed.wire_issues == [] and plain.wire_issues == []
    assert streamed.ttft_s is not None and streamed.ttft_s <= streamed.latency_s
    assert len(streamed.chunk_times_s) >= 5 and streamed.chunk_times_s == sorted(streamed.chunk_times_s)
    # the body is stored once: what the exchange's own fields hold is not repeated inside ``response``
    for ex in (streamed, plain):
        message = ex.response["choices"][0]["message"]
        assert not {"content", "tool_calls", "reasoning_content"} & set(message), message
        assert "content" not in (ex.response["choices"][0].get("logprobs") or {})
        assert ex.response["usage"] and ex.response["choices"][0]["finish_reason"] == "tool_calls"
    sent = srv.log[-1][2]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["model"] == "scripted-model"


@pytest.mark.parametrize("usage,expected", [
    ({"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 64}},
     (100, 5, 64, "prompt_tokens_details.cached_tokens")),
    ({"prompt_tokens": 100, "completion_tokens": 5, "prompt_cache_hit_tokens": 32, "prompt_cache_miss_tokens": 68},
     (100, 5, 32, "prompt_cache_hit_tokens")),
    ({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 80, "cache_creation_input_tokens": 10},
     (100, 5, 80, "cache_read_input_tokens")),
    ({"prompt_tokens": 100, "completion_tokens": 5}, (100, 5, None, None)),
    ({"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0}},
     (100, 5, 0, "prompt_tokens_details.cached_tokens")),
])
@pytest.mark.parametrize("stream", [False, True])
async def test_usage_normalised_over_the_wire(scripted_server, usage, expected, stream):
    srv = scripted_server(lambda b, c: Reply.text("hi", usage=usage))
    ex = await _chat(srv.base_url, stream=stream)
    u = ex.usage
    assert (u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.cached_field) == expected


def test_usage_absent_is_not_reported_not_zero():
    u = normalize_usage(None)
    assert u.cached_tokens is None and u.prompt_tokens is None


async def test_wire_issues(scripted_server):
    def responder(body, ctx):
        tag = body["messages"][0]["content"]
        if tag == "odd-finish":
            return Reply.text("x", finish_reason="eos_token")
        if tag == "dup-ids":
            return Reply(tool_calls=[{"name": "get_weather", "arguments": "{}", "id": "same"},
                                     {"name": "get_weather", "arguments": "{}", "id": "same"}])
        if tag == "no-id":
            return Reply(tool_calls=[{"name": "get_weather", "arguments": "{}", "id": None}])
        if tag == "malformed":
            return Reply.text("hello", malformed_chunk_at=2)
        if tag == "no-usage":
            return Reply.text("hello", stream_usage=False)
        return Reply.text("x")

    srv = scripted_server(responder)
    async with EndpointClient(cfg(srv.base_url), backoff_base=0.001) as c:
        async def issues(tag, stream):
            ex = await c.chat({"messages": [{"role": "user", "content": tag}]}, stream=stream)
            assert ex.ok
            return ex.wire_issues

        for stream in (False, True):
            assert "unknown_finish_reason:eos_token" in await issues("odd-finish", stream)
            assert "duplicate_tool_call_id:same" in await issues("dup-ids", stream)
            assert "tool_call_missing_id:0" in await issues("no-id", stream)
        assert await issues("malformed", True) == ["malformed_chunk"]
        ex = await c.chat({"messages": [{"role": "user", "content": "malformed"}]}, stream=True)
        assert ex.content == "hello"  # the bad line is skipped, not fatal
        assert await issues("no-usage", True) == ["stream_missing_usage"]
        assert await issues("fine", True) == []


async def test_fault_injection_counts_match_exactly_at_concurrency(scripted_server):
    """Every injected transport fault shows up as exactly one retry; content faults reach the records."""
    inj = FaultInjector(schema_responder, {"429": 0.15, "500": 0.1, "truncate": 0.1, "malformed_args": 0.1,
                                           "schema_violation": 0.1}, seed=7, retry_after=0)
    srv = scripted_server(inj)
    bodies = [{"messages": [{"role": "user", "content": f"case {i}"}], "tools": [WEATHER], "tool_choice": "required"}
              for i in range(120)]
    async with EndpointClient(cfg(srv.base_url, concurrency=16), backoff_base=0.001) as c:
        exs = await asyncio.gather(*(c.chat(b, stream=(i % 2 == 0)) for i, b in enumerate(bodies)))
    assert all(e.ok for e in exs)
    retried = [s for e in exs for s in e.retried_statuses]
    assert retried.count(429) == inj.injected["429"] > 0
    assert retried.count(500) == inj.injected["500"] > 0
    assert retried.count(0) == inj.injected["truncate"] > 0
    assert sum(e.attempts for e in exs) == srv.request_count == len(bodies) + sum(inj.injected[k]
                                                                                  for k in ("429", "500", "truncate"))

    def parses(e):
        try:
            return isinstance(json.loads(e.tool_calls[0].arguments), dict)
        except ValueError:
            return False

    assert sum(not parses(e) for e in exs) == inj.injected["malformed_args"] > 0
    missing_city = sum(parses(e) and "city" not in json.loads(e.tool_calls[0].arguments) for e in exs)
    assert missing_city == inj.injected["schema_violation"] > 0
    # the decision is a pure function of (seed, request, attempt), so arrival order cannot change it
    again = FaultInjector(schema_responder, dict(inj.rates), seed=7)
    sent = [body_hash({**b, "model": "scripted-model"}) for b in bodies]
    assert inj.injected_keys["429"] == {h for h in sent if again.draw(h, 1, "429")}


async def test_api_key_only_in_header_and_redacted_from_errors(scripted_server, monkeypatch):
    key = "sk-test-SECRET-0123456789"
    monkeypatch.setenv("VERIFIER_TEST_KEY", key)
    srv = scripted_server(schema_responder, api_key=key, echo_auth_in_errors=True)
    ok = await _chat(srv.base_url, api_key_env="VERIFIER_TEST_KEY")
    assert ok.ok and key not in ok.model_dump_json()
    monkeypatch.setenv("VERIFIER_TEST_KEY", key + "-wrong")
    bad = await _chat(srv.base_url, api_key_env="VERIFIER_TEST_KEY")
    assert bad.error_class == "auth" and bad.attempts == 1
    assert key not in bad.model_dump_json() and "***" in bad.error_message


async def test_preflight_lines(scripted_server):
    srv = scripted_server(schema_responder, api_key="k1", models=["m-a", "m-b"])
    c = EndpointClient(EndpointConfig(name="x", base_url=srv.base_url), api_key="k1")
    async with c:
        await c.preflight()
    assert c.config.model == "m-a"  # default model = first id of GET /models
    with pytest.raises(EndpointError, match="model 'zzz' is not served") as e:
        async with EndpointClient(EndpointConfig(name="x", base_url=srv.base_url, model="zzz"), api_key="k1") as c2:
            await c2.preflight()
    assert e.value.kind == "unknown_model"
    with pytest.raises(EndpointError, match="authentication failed") as e:
        async with EndpointClient(EndpointConfig(name="x", base_url=srv.base_url), api_key="bad") as c3:
            await c3.preflight()
    assert e.value.kind == "auth" and "\n" not in str(e.value)


async def test_extra_body_merged_and_hash_is_canonical(scripted_server):
    srv = scripted_server(lambda b, c: Reply.text("ok"))
    async with EndpointClient(cfg(srv.base_url, extra_body={"provider": {"only": ["X"]}}), backoff_base=0.001) as c:
        ex = await c.chat({"temperature": 0, "messages": [{"role": "user", "content": "hi"}]})
    sent = srv.log[-1][2]
    assert sent["provider"] == {"only": ["X"]} and sent["stream"] is False
    assert ex.request_hash == request_hash(sent)


async def test_rate_limit_spaces_requests(scripted_server):
    srv = scripted_server(lambda b, c: Reply.text("ok"))
    async with EndpointClient(cfg(srv.base_url, rate=20.0), backoff_base=0.001) as c:
        t0 = time.perf_counter()
        await asyncio.gather(*(c.chat({"messages": [{"role": "user", "content": str(i)}]}) for i in range(30)))
        elapsed = time.perf_counter() - t0
    assert elapsed >= 0.9  # 30 requests at 20/s need at least ~1 s of throttle windows


@pytest.mark.parametrize("library", [True, False], ids=["aiohttp-transport", "httpx-transport"])
@pytest.mark.parametrize("stream", [False, True])
async def test_both_transports_agree(scripted_server, library, stream):
    """The lean transport and httpx's own one give identical exchanges (retries, truncation, reassembly)."""
    def responder(body, ctx):
        if ctx.attempt == 1:
            return Reply.error(503, "busy", retry_after=0)
        r = Reply(content="ok", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "c1"}])
        if ctx.attempt == 2 and stream:
            r.truncate_after_chunks = 3
        return r

    srv = scripted_server(responder)
    ex = await _chat(srv.base_url, stream=stream, client_kw={"library_transport": library})
    assert ex.ok and ex.retried_statuses == ([503, 0] if stream else [503])
    assert ex.content == "ok" and ex.tool_calls[0].arguments == '{"city":"Oslo"}' and ex.wire_issues == []


async def test_keep_alive_reuses_connections_and_survives_server_closing_idle_ones(scripted_server):
    srv = scripted_server(lambda b, c: Reply.text("ok"))
    async with EndpointClient(cfg(srv.base_url, concurrency=4), backoff_base=0.001) as c:
        exs = await asyncio.gather(*(c.chat({"messages": [{"role": "user", "content": str(i)}]}) for i in range(40)))
        assert all(e.ok for e in exs) and srv.connection_count <= 4
        # the server drops every idle keep-alive connection; the next request must go out on a fresh one
        srv._loop.call_soon_threadsafe(lambda: [w.transport.abort() for w in list(srv._writers)])
        await asyncio.sleep(0.1)
        ex = await c.chat({"messages": [{"role": "user", "content": "after close"}]})
    assert ex.ok and ex.attempts == 1


async def test_stream_closed_cleanly_without_done_is_broken_and_retried_unless_complete(scripted_server):
    """A stream whose HTTP body ends properly without ``data: [DONE]``: kept (wire issue ``no_done``, sent once) when
    the finish reason and the usage chunk both arrived, as K2VV and the openai SDK accept it; incomplete (no usage
    chunk after the finish, which may have been cut off) it stays a broken stream, retried."""
    srv = scripted_server(lambda b, ctx: Reply.text("whole answer", send_done=False))
    ex = await _chat(srv.base_url, stream=True)
    assert ex.ok and ex.attempts == 1 and ex.retried_statuses == [] and ex.content == "whole answer"
    assert ex.finish_reason == "stop" and ex.usage.completion_tokens == 7 and ex.wire_issues == ["no_done"]

    srv = scripted_server(lambda b, ctx: Reply.text("partial answer", send_done=ctx.attempt > 1,
                                                    stream_usage=ctx.attempt > 1))
    ex = await _chat(srv.base_url, stream=True)
    assert ex.ok and ex.attempts == 2 and ex.retried_statuses == [0] and ex.content == "partial answer"
    assert ex.wire_issues == []
    once = await _chat(srv.base_url, {**BODY, "seed": 1}, stream=True, max_attempts=1)
    assert once.error_class == "broken_stream" and once.status == 200 and "without [DONE]" in once.error_message


async def test_completions_and_post_json_share_retries(scripted_server):
    def responder(body, ctx):
        if ctx.attempt == 1:
            return Reply.error(502, "bad gateway")
        if ctx.path.endswith("/completions") and not ctx.path.endswith("/chat/completions"):
            return Reply(body={"choices": [{"text": "", "logprobs": {"tokens": ["a"], "token_logprobs": [None]}}]})
        return Reply(body={"vocab_size": 4, "echo": body})

    srv = scripted_server(responder)
    async with EndpointClient(cfg(srv.base_url), backoff_base=0.001) as c:
        ex = await c.completions({"prompt": "a", "echo": True, "logprobs": 1, "max_tokens": 0})
        status, data, ex2 = await c.post_json("/x/distributions", {"prompt": "a", "start": 1})
    assert ex.ok and ex.attempts == 2 and ex.response["choices"][0]["logprobs"]["tokens"] == ["a"]
    assert srv.log[1][2]["model"] == "scripted-model" and srv.log[1][2]["stream"] is False
    assert status == 200 and ex2.attempts == 2 and data["echo"] == {"prompt": "a", "start": 1}  # body sent as given


@pytest.mark.parametrize("stream", [False, True])
async def test_odd_shapes_are_flagged_not_fatal(scripted_server, stream):
    """Content parts instead of a string, junk logprobs, numeric ids: recorded with wire issues, never a crash."""
    def responder(body, ctx):
        if body.get("stream"):
            return Reply(body=None, content=None, tool_calls=[{"name": "get_weather", "arguments": "{}", "id": 17}])
        return Reply(body={"choices": [{"index": 0, "finish_reason": "stop", "logprobs": {"content": "junk"},
                                        "message": {"role": "assistant",
                                                    "content": [{"type": "text", "text": "hi"}]}}]})

    srv = scripted_server(responder)
    ex = await _chat(srv.base_url, stream=stream)
    if stream:
        assert ex.ok and ex.tool_calls[0].id == "17"
    else:
        assert ex.ok and "content_not_string" in ex.wire_issues and "malformed_logprobs" in ex.wire_issues
        assert json.loads(ex.content) == [{"type": "text", "text": "hi"}] and ex.logprobs is None
