"""What real providers send inside a 200 body or SSE stream, on raw loopback bytes through the real client (issue #39).

Each test writes the provider's exact bytes (a BOM, an ``event: error``, OpenRouter's mid-stream error chunk, index-less
parallel deltas, a finish reason that is an object, arguments nested 1,500 deep, a stream without ``[DONE]``) and
checks the classification the client records: a quirk that does not change the reply is read as the reply (rows 1,
3, 9), a reply the provider broke is a provider error or malformed, never the model's output (rows 2, 5, 8).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.http.raw_server import RawRequest, RawServer, http_response
from verifier.http.client import EndpointClient
from verifier.records import EndpointConfig, Exchange

BOM = b"\xef\xbb\xbf"
BODY = {"messages": [{"role": "user", "content": "weather and time in Oslo?"}]}
USAGE = {"prompt_tokens": 9, "completion_tokens": 4}
CALLS = [("call_a", "get_weather", '{"city": "Oslo"}'), ("call_b", "get_time", '{"tz": "Europe/Oslo"}')]


def chunk(delta: dict | None = None, finish: Any = None, **top: Any) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-q", "object": "chat.completion.chunk", "model": "m", "choices": choices, **top}


def call_chunks(*, index: bool = True, split_args: int = 2) -> list[dict]:
    """The two parallel calls of CALLS as OpenAI streams them: a header delta (id, name), then argument pieces."""
    out = []
    for i, (cid, name, args) in enumerate(CALLS):
        head = {"id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
        out.append(chunk({"tool_calls": [{"index": i, **head} if index else head]}))
        step = -(-len(args) // split_args)
        for k in range(0, len(args), step):
            piece = {"function": {"arguments": args[k:k + step]}}
            out.append(chunk({"tool_calls": [{"index": i, **piece} if index else piece]}))
    return out


def finish_and_usage(finish: Any = "tool_calls") -> list[dict]:
    return [chunk({}, finish), chunk(None, usage=USAGE)]


def sse(events: list[dict | str], *, done: bool = True) -> bytes:
    """``data:`` lines for dict events, raw text for str events (``event: error`` lines and the like)."""
    out = b"".join(e.encode() if isinstance(e, str) else b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return out + (b"data: [DONE]\n\n" if done else b"")


def chunked(*pieces: bytes) -> list[bytes]:
    """A 200 event-stream head and each piece as one HTTP chunk (written apart), then the last chunk."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    return [head] + [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p] + [b"0\r\n\r\n"]


async def exchange(writes: list[bytes], *, stream: bool = True, max_attempts: int = 1) -> tuple[Exchange, int]:
    """One chat through the real client against a raw server that writes ``writes`` apart (drain + pause between)."""
    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        for data in writes:
            w.write(data)
            await w.drain()
            await asyncio.sleep(0.005)

    async with RawServer(reply) as srv:
        cfg = EndpointConfig(name="quirky", base_url=srv.url, model="m", max_attempts=max_attempts)
        async with EndpointClient(cfg, backoff_base=0.001) as c:
            ex = await c.chat(BODY, stream=stream)
        return ex, len(srv.requests)


def calls(ex: Exchange) -> list[tuple[str | None, str | None, str]]:
    return [(c.id, c.name, c.arguments) for c in ex.tool_calls]


# ----------------------------------------------------------------------------------------------- row 1: BOM


@pytest.mark.parametrize("split", [False, True], ids=["bom_with_first_line", "bom_split_across_reads"])
async def test_bom_before_the_first_event_is_skipped_and_the_first_event_kept(split):
    """The first event carries the first call's id and name: losing it (as when the BOM hid its field name) made
    a nameless call the model was blamed for."""
    body = BOM + sse(call_chunks() + finish_and_usage())
    pieces = (body[:2], body[2:]) if split else (body,)
    ex, sent = await exchange(chunked(*pieces))
    assert ex.ok and sent == 1 and ex.wire_issues == [], ex
    assert calls(ex) == CALLS and ex.finish_reason == "tool_calls"


async def test_only_one_bom_is_skipped():
    """The SSE spec strips one leading BOM; a second one is part of the first line (an unknown field, ignored)."""
    ex, _ = await exchange(chunked(BOM + BOM + sse(call_chunks() + finish_and_usage())))
    assert ex.ok and calls(ex)[0][:2] == (None, None)  # the first event really was dropped: the rule is exact


# ----------------------------------------------------------------------------------------------- row 2: errors


async def test_openrouter_mid_stream_error_with_choices_is_a_broken_stream_not_a_reply():
    """OpenRouter's documented shape: an ``error`` object beside ``choices`` whose finish_reason is ``"error"``."""
    err = chunk({"content": ""}, "error", error={"code": "server_error", "message": "Provider disconnected"})
    ex, sent = await exchange(chunked(sse(call_chunks()[:3] + [err])), max_attempts=2)
    assert ex.error_class == "broken_stream" and not ex.ok and ex.attempts == 2 == sent, ex
    assert ex.error_message == "error event in stream: Provider disconnected"
    assert ex.tool_calls == [] and ex.content is None  # the partial reply is not kept as output


async def test_finish_reason_error_alone_is_a_broken_stream():
    ex, _ = await exchange(chunked(sse(call_chunks()[:2] + [chunk({}, "error")])))
    assert ex.error_class == "broken_stream" and "finish_reason 'error'" in ex.error_message


@pytest.mark.parametrize("data", ['{"error": {"message": "upstream overloaded", "code": 529}}', "upstream overloaded"])
async def test_sse_event_error_is_a_broken_stream(data):
    body = sse(call_chunks()[:3], done=False) + f"event: error\ndata: {data}\n\n".encode() + sse(finish_and_usage())
    ex, _ = await exchange(chunked(body))
    assert ex.error_class == "broken_stream" and ex.error_message == "error event in stream: upstream overloaded"
    assert ex.tool_calls == []


async def test_non_stream_body_with_error_and_choices_is_a_provider_error():
    body = {"id": "x", "object": "chat.completion", "model": "m",
            "error": {"code": 502, "message": "Provider returned error"},
            "choices": [{"index": 0, "finish_reason": "error",
                         "message": {"role": "assistant", "content": "It is sunny in"}}]}
    ex, sent = await exchange([http_response(200, json.dumps(body).encode())], stream=False, max_attempts=2)
    assert ex.error_class == "provider_error" and ex.attempts == 2 == sent and ex.status == 200
    assert ex.error_message == "the provider reported an error in a 200 reply: Provider returned error"
    assert ex.content is None and ex.wire_issues == ["error_in_body"]


async def test_error_null_beside_choices_is_an_ordinary_reply():
    """``"error": null`` is how some gateways say "no error": the reply is read as usual."""
    ok = chunk({"content": "hi"}, error=None)
    ex, _ = await exchange(chunked(sse([ok] + finish_and_usage("stop"))))
    assert ex.ok and ex.content == "hi"


# ----------------------------------------------------------------------------------------------- row 3: no index


@pytest.mark.parametrize("split_args", [1, 3])
async def test_parallel_deltas_without_index_are_split_on_a_new_id(split_args):
    ex, _ = await exchange(chunked(sse(call_chunks(index=False, split_args=split_args) + finish_and_usage())))
    assert ex.ok and calls(ex) == CALLS, calls(ex)
    assert "tool_call_delta_without_index" in ex.wire_issues


async def test_parallel_deltas_without_index_or_id_are_split_on_a_new_name():
    events = []
    for _, name, args in CALLS:
        events.append(chunk({"tool_calls": [{"function": {"name": name, "arguments": args[:5]}}]}))
        events.append(chunk({"tool_calls": [{"function": {"arguments": args[5:]}}]}))
    ex, _ = await exchange(chunked(sse(events + finish_and_usage())))
    assert ex.ok and [(c.name, c.arguments) for c in ex.tool_calls] == [(n, a) for _, n, a in CALLS]


async def test_all_calls_in_one_delta_without_index():
    whole = [{"id": cid, "type": "function", "function": {"name": n, "arguments": a}} for cid, n, a in CALLS]
    ex, _ = await exchange(chunked(sse([chunk({"tool_calls": whole})] + finish_and_usage())))
    assert ex.ok and calls(ex) == CALLS


async def test_a_name_split_over_two_deltas_without_index_stays_one_call():
    events = [chunk({"tool_calls": [{"id": "call_a", "function": {"name": "get_", "arguments": ""}}]}),
              chunk({"tool_calls": [{"function": {"name": "weather"}}]}),
              chunk({"tool_calls": [{"function": {"arguments": '{"city": "Oslo"}'}}]})]
    ex, _ = await exchange(chunked(sse(events + finish_and_usage())))
    assert ex.ok and calls(ex) == [CALLS[0]]


# ----------------------------------------------------------------------------------------------- row 5: deep args

DEEP = "[" * 1500 + "]" * 1500


@pytest.mark.parametrize("stream", [True, False])
async def test_arguments_nested_1500_deep_are_a_malformed_reply(stream):
    if stream:
        events = call_chunks()
        events[1] = chunk({"tool_calls": [{"index": 0, "function": {"arguments": DEEP}}]})
        del events[2]
        writes = chunked(sse(events + finish_and_usage()))
    else:
        msg = {"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": n, "arguments": DEEP if i == 0 else a}}
            for i, (cid, n, a) in enumerate(CALLS)]}
        body = {"id": "x", "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}], "usage": USAGE}
        writes = [http_response(200, json.dumps(body).encode())]
    ex, sent = await exchange(writes, stream=stream, max_attempts=3)
    assert ex.error_class == "malformed_response" and sent == 1, ex  # a reply, not a transport fault: not retried
    assert "tool_call_arguments_too_deep:0" in ex.wire_issues and ex.tool_calls[0].arguments == DEEP


async def test_arguments_as_an_object_nested_past_the_parser_are_a_malformed_body():
    """Arguments sent as a JSON object 5,000 deep: the body itself cannot be parsed; one exchange's fault."""
    text = json.dumps({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "@"}}]}}]})
    body = text.replace('"@"', '{"a":' * 5000 + "{}" + "}" * 5000).encode()
    ex, _ = await exchange([http_response(200, body)], stream=False)
    assert ex.error_class == "malformed_response" and ex.error_message == "response body nests too deep to read as JSON"


# ----------------------------------------------------------------------------------------------- row 8: finish


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("finish", [{"type": "tool_calls"}, 7, ["tool_calls"]])
async def test_finish_reason_that_is_not_text_is_a_malformed_reply(stream, finish):
    if stream:
        writes = chunked(sse(call_chunks() + finish_and_usage(finish)))
    else:
        msg = {"role": "assistant", "tool_calls": [{"id": cid, "type": "function", "function": {
            "name": n, "arguments": a}} for cid, n, a in CALLS]}
        body = {"id": "x", "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": USAGE}
        writes = [http_response(200, json.dumps(body).encode())]
    ex, _ = await exchange(writes, stream=stream)
    assert ex.error_class == "malformed_response" and "malformed_finish_reason" in ex.wire_issues, ex
    assert ex.error_message == "unreadable reply shape: malformed_finish_reason"


# ----------------------------------------------------------------------------------------------- row 9: no [DONE]


async def test_complete_stream_without_done_is_kept_with_wire_issue_no_done():
    ex, sent = await exchange(chunked(sse(call_chunks() + finish_and_usage(), done=False)), max_attempts=5)
    assert ex.ok and sent == 1 and ex.attempts == 1 and ex.wire_issues == ["no_done"], ex
    assert calls(ex) == CALLS and ex.usage.prompt_tokens == 9


async def test_usage_in_the_finish_chunk_counts_as_complete():
    """vLLM's continuous usage stats put a usage object in every chunk, the finish chunk included."""
    finish = chunk({}, "tool_calls", usage=USAGE)
    ex, _ = await exchange(chunked(sse(call_chunks() + [finish], done=False)))
    assert ex.ok and ex.wire_issues == ["no_done"] and calls(ex) == CALLS


@pytest.mark.parametrize("cut", ["before_finish", "before_usage", "usage_only_before_finish"])
async def test_stream_closed_before_its_finish_or_usage_stays_broken(cut):
    events = {"before_finish": call_chunks(), "before_usage": call_chunks() + finish_and_usage()[:1],
              "usage_only_before_finish": [chunk(None, usage=USAGE)] + call_chunks() + finish_and_usage()[:1]}[cut]
    ex, sent = await exchange(chunked(sse(events, done=False)), max_attempts=2)
    assert ex.error_class == "broken_stream" and ex.attempts == 2 == sent
    assert "without [DONE]" in ex.error_message
