"""Fuzz the response parsers: thousands of mutated completion bodies and SSE streams, none may raise.

Why: the parsers read bytes a provider chose. A ``TypeError`` out of ``finish_reason: {}`` or ``tool_calls: 7``
used to end a whole suite. Here every mutated body must come out as Exchange fields that validate, and the
record must survive the store (write, read back equal), including lone UTF-16 surrogates. Seeded and bounded
in count and time, so the test is the same on every run and cheap on a 2-core CI box.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import time
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verifier.http.parse import (
    _exchange_defaults,
    _from_completion,
    _StreamAccumulator,
)
from verifier.records import Exchange, ExchangeRecord
from verifier.run.store import parse_record_line, record_line

_ODD_VALUES: list[Any] = [None, {}, [], 7, -1, 2**70, 1.5, float("nan"), True, False, "", "x", "\ud83d", "\ude00x",
                          "tool_calls", [7], [{}], {"a": {}}, [None, 1, "s"], "\x00", "é" * 3, {"index": "0"}]


def _valid_body() -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "logprobs": {"content": [{"token": "a", "logprob": -0.1}]},
                         "message": {"role": "assistant", "content": "hi", "reasoning_content": "r",
                                     "tool_calls": [{"id": "call_1", "type": "function",
                                                     "function": {"name": "get_weather",
                                                                  "arguments": "{\"city\": \"Paris\"}"}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 2},
                      "input_tokens": 4, "cache_read_input_tokens": 1}}


def _valid_chunks() -> list[dict]:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "he"}, "logprobs": {"content": [{"token": "he"}]}}]},
        {**base, "choices": [{"index": 0, "delta": {"reasoning_content": "hm"}}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                                    "function": {"name": "f", "arguments": ""}}]}}]},
        {**base,
         "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\":"}}]}}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
    ]


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _mutate(rng: random.Random, doc: Any) -> Any:
    """Replace, delete or retype one to three nodes of ``doc`` (a copy) with odd values."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(doc)
        path = rng.choice(paths)
        value = rng.choice(_ODD_VALUES)
        if not path:
            return copy.deepcopy(value) if rng.random() < 0.5 else doc
        parent = doc
        for p in path[:-1]:
            parent = parent[p]
        if isinstance(parent, dict) and rng.random() < 0.25:
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(value)
    return doc


def _assert_storable(fields: dict, stream: bool) -> None:
    """Parser output -> Exchange (no fallback allowed) -> record line -> read back equal."""
    ex = Exchange.model_validate({"request_hash": "h", "stream": stream, **_exchange_defaults(fields)})
    rec = ExchangeRecord(**ex.model_dump(), kind="toolcall", suite="fuzz", case_id="c", endpoint="e")
    back = parse_record_line(record_line(rec).strip())
    assert back.model_dump(mode="json") == rec.model_dump(mode="json") or _has_nan(rec)


def _has_nan(rec: ExchangeRecord) -> bool:
    return "NaN" in json.dumps(rec.model_dump(mode="json"))  # NaN != NaN: equality cannot show the round trip


def _stream(rng: random.Random) -> list[str]:
    lines = []
    for chunk in _valid_chunks():
        r = rng.random()
        if r < 0.25:
            chunk = _mutate(rng, chunk)
        if r < 0.05:
            lines.append(rng.choice(["{not json", "", "[1,2]", "null", "\"s\"", "{\"error\": 3}", "[" * 5000]))
            continue
        lines.append(json.dumps(chunk))
    if rng.random() < 0.1:
        rng.shuffle(lines)
    return lines


def test_mutated_completion_bodies_never_raise():
    rng = random.Random(1234)
    t_end = time.monotonic() + 20.0
    n = 0
    classified = 0
    while n < 4000 and time.monotonic() < t_end:
        body = _mutate(rng, _valid_body())
        out = _from_completion(200, body)
        classified += out.get("error_class") == "malformed_response"
        _assert_storable(out, stream=False)
        n += 1
    assert n >= 1000, f"only {n} bodies in the time budget"
    assert 0 < classified < n  # some mutations break the shape (classified), most stay scorable


def test_mutated_sse_streams_never_raise():
    rng = random.Random(99)
    t_end = time.monotonic() + 20.0
    n = 0
    while n < 2000 and time.monotonic() < t_end:
        acc = _StreamAccumulator()
        try:
            for i, line in enumerate(_stream(rng)):
                if acc.feed(line, float(i)):
                    break
        except Exception as e:  # only the documented signal may leave feed(): an error event ends the stream
            assert type(e).__name__ == "_BrokenStream", repr(e)
            n += 1
            continue
        _assert_storable(acc.result(200), stream=True)
        n += 1
    assert n >= 500, f"only {n} streams in the time budget"


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=4),
                     max_leaves=12)
_keys = st.sampled_from(["choices", "message", "tool_calls", "function", "arguments", "finish_reason", "usage",
                         "delta", "index", "id", "name", "content", "logprobs", "error"])
_shaped = st.recursive(_json, lambda inner: st.dictionaries(_keys, inner, max_size=5) | st.lists(inner, max_size=3),
                       max_leaves=20)


@settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(_shaped)
@pytest.mark.slow
def test_arbitrary_json_with_openai_keys_never_raises(doc):
    _assert_storable(_from_completion(200, doc), stream=False)
    acc = _StreamAccumulator()
    try:
        acc.feed(json.dumps(doc), 0.0)
        acc.feed(json.dumps({"choices": [doc]}), 0.1)
        acc.feed(json.dumps({"choices": [{"delta": doc}]}), 0.2)
    except Exception as e:
        assert type(e).__name__ == "_BrokenStream", repr(e)
        return
    _assert_storable(acc.result(200), stream=True)


def test_garbage_stream_is_classified_not_scored():
    acc = _StreamAccumulator()
    for line in ["{not json", "oops", "[1, 2]", "null"]:
        acc.feed(line, 0.0)
    acc.feed("[DONE]", 0.1)
    out = acc.result(200)
    assert out["error_class"] == "malformed_response"
    assert "4 data lines" in out["error_message"]


def test_surrogate_pair_split_across_argument_deltas_is_joined():
    acc = _StreamAccumulator()
    acc.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "c1", "function": {"name": "say", "arguments": "{\"t\": \"\ud83d"}}]}}]}), 0.0)
    acc.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": "\ude00\"}"}}]}, "finish_reason": "tool_calls"}]}), 0.1)
    acc.feed("[DONE]", 0.2)
    out = acc.result(200)
    assert out["tool_calls"][0]["arguments"] == "{\"t\": \"😀\"}"
    assert json.loads(out["tool_calls"][0]["arguments"]) == {"t": "😀"}


def test_shapes_named_in_the_issue():
    for finish in ({}, [], 7, {"a": 1}):
        body = _valid_body()
        body["choices"][0]["finish_reason"] = finish
        out = _from_completion(200, body)
        assert any(i.startswith("unknown_finish_reason") for i in out["wire_issues"]), out["wire_issues"]
        assert out["error_class"] == "malformed_response"  # not text: unreadable, its calls never scored (#39 row 8)
    body = _valid_body()
    body["choices"][0]["message"]["tool_calls"] = 7
    out = _from_completion(200, body)
    assert out["tool_calls"] == [] and "tool_calls_not_list" in out["wire_issues"]
    assert out["error_class"] == "malformed_response"  # unreadable: a provider fault, not "no tool call"
    body = _valid_body()
    body["choices"] = ["not a choice"]
    assert _from_completion(200, body)["error_class"] == "malformed_response"
    body = _valid_body()
    body["choices"][0]["message"]["content"] = {"nested": True}  # not text, not content parts: unreadable
    assert _from_completion(200, body)["error_class"] == "malformed_response"
    body = _valid_body()
    body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] = {"n": 1}
    assert _from_completion(200, body)["error_class"] == "malformed_response"
    body = _valid_body()
    body["choices"][0]["message"]["content"] = [{"type": "text", "text": "hi"}]  # content parts: a known dialect
    out = _from_completion(200, body)
    assert "error_class" not in out and "content_not_string" in out["wire_issues"]


def test_every_hostile_reply_of_the_test_server_is_classified():
    """The scripted server's hostile bodies and streams all come out as malformed_response, none as a decision."""
    from verifier.testing.responders import HOSTILE_BODIES, HOSTILE_STREAMS

    for body in HOSTILE_BODIES:
        assert _from_completion(200, body).get("error_class") == "malformed_response", body
    for lines in HOSTILE_STREAMS:
        acc = _StreamAccumulator()
        for i, line in enumerate(lines):
            acc.feed(line, float(i))
        acc.feed("[DONE]", 9.0)
        assert acc.result(200).get("error_class") == "malformed_response", lines


def test_store_keeps_a_lone_surrogate_and_reopens(tmp_path):
    """Write a record holding ``\\ud83d`` alone, reload the file, reopen it as a resumed run would: same text back."""
    from verifier.run.store import RecordStore

    path = tmp_path / "records.jsonl"
    rec = ExchangeRecord(request_hash="h", kind="toolcall", suite="s", case_id="c1", endpoint="e", status=200,
                         content="a\ud83db", tool_calls=[{"name": "say", "arguments": "{\"t\": \"\ude00\"}"}])
    with RecordStore(path) as store:
        store.append(rec)
    assert b"\\ud83d" in path.read_bytes()
    reopened = RecordStore(path)  # what --resume does first
    assert rec.key() in reopened.done_keys()
    back = reopened.read()
    assert [r.content for r in back] == ["a\ud83db"] and back[0].tool_calls[0].arguments == "{\"t\": \"\ude00\"}"
    reopened.append(rec.model_copy(update={"case_id": "c2"}))
    reopened.close()
    assert [r.case_id for r in RecordStore(path).read()] == ["c1", "c2"]


# ------------------------------------------------------------------------ issue #39: index-less deltas, deep JSON

_names = st.sampled_from(["get_weather", "get_time", "search", "f"])
_args = st.dictionaries(st.sampled_from(["city", "q", "n", "tz"]), st.text(max_size=6) | st.integers(),
                        max_size=3).map(json.dumps)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(calls=st.lists(st.tuples(_names, _args), min_size=1, max_size=4), with_ids=st.booleans(),
       cuts=st.lists(st.integers(min_value=1, max_value=8), min_size=4, max_size=4), packed=st.booleans())
def test_parallel_calls_streamed_without_index_reassemble_exactly(calls, with_ids, cuts, packed):
    """Any parallel calls, streamed without ``index`` (an id on each header, or none), arguments cut anywhere
    (each piece non-empty), one delta per piece or all pieces of a call in one chunk: the calls come back as sent,
    never merged into one. Consecutive calls of the same name without ids are the one ambiguous layout: a name
    there starts a new call only once the previous call has arguments, which every generated call has."""
    calls = [(n, a) for n, a in calls]
    deltas_per_chunk: list[list[dict]] = []
    for k, (name, args) in enumerate(calls):
        head: dict = {"type": "function", "function": {"name": name, "arguments": ""}}
        if with_ids:
            head["id"] = f"call_{k}"
        step = max(1, len(args) // cuts[k % 4])
        pieces = [{"function": {"arguments": args[i:i + step]}} for i in range(0, len(args), step)]
        if packed:
            deltas_per_chunk.append([head, *pieces])
        else:
            deltas_per_chunk += [[head], *([p] for p in pieces)]
    acc = _StreamAccumulator()
    for i, deltas in enumerate(deltas_per_chunk):
        acc.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": deltas}}]}), float(i))
    acc.feed(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}}), 9.0)
    out = acc.result(200)
    assert [(c["name"], c["arguments"]) for c in out["tool_calls"]] == calls
    assert [c["id"] for c in out["tool_calls"]] == ([f"call_{k}" for k in range(len(calls))] if with_ids
                                                   else [None] * len(calls))
    assert "error_class" not in out and "tool_call_delta_without_index" in out["wire_issues"]


_nested = st.recursive(st.none() | st.integers() | st.text(alphabet='[]{}"\\ab', max_size=6),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                           st.text(alphabet='[]{}"\\ab', max_size=4), inner, max_size=3), max_leaves=30)


def _depth(v: Any) -> int:
    if isinstance(v, list):
        return 1 + max(map(_depth, v), default=0)
    if isinstance(v, dict):
        return 1 + max(map(_depth, v.values()), default=0)
    return 0


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(_nested, st.integers(min_value=0, max_value=3))
def test_nesting_depth_matches_the_parsed_value(value, indent):
    """Brackets and escaped quotes inside strings never count; the depth is the parsed value's, however written."""
    from verifier.json_depth import nesting_depth

    assert nesting_depth(json.dumps(value, indent=indent or None)) == _depth(value)


def test_deep_arguments_are_malformed_in_both_parsers_and_shallow_ones_are_not():
    from verifier.json_depth import MAX_ARGUMENT_DEPTH

    for depth, bad in ((MAX_ARGUMENT_DEPTH, False), (MAX_ARGUMENT_DEPTH + 1, True), (100_000, True)):
        args = "[" * depth + "]" * depth
        body = _valid_body()
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = args
        out = _from_completion(200, body)
        acc = _StreamAccumulator()
        acc.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c", "function": {"name": "f", "arguments": args}}]}, "finish_reason": "tool_calls"}]}),
            0.0)
        for o in (out, acc.result(200)):
            assert (o.get("error_class") == "malformed_response") is bad, (depth, o.get("error_class"))
            assert ("tool_call_arguments_too_deep:0" in o["wire_issues"]) is bad


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self):  # type: ignore[override]
        for p in self.parts:
            yield p


async def _events(parts: list[bytes]) -> list[tuple[str, str]]:
    from httpx_sse import EventSource

    from verifier.http.bodies import CappedText

    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Chunks(parts))
    return [(e.event, e.data) async for e in EventSource(CappedText(response, 1 << 20)).aiter_sse()]  # type: ignore[arg-type]


_SSE_BODY = ('data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", "function": '
             '{"name": "get_weather", "arguments": "{\\"city\\": \\"Zürich 😀\\"}"}}]}}]}\r\n\r\n'
             'event: error\ndata: {"error": {"message": "é"}}\n\n: keep-alive\n\ndata: [DONE]\n\n').encode()


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(st.integers(min_value=1, max_value=len(_SSE_BODY) + 2), max_size=6), st.booleans())
def test_sse_body_with_a_bom_split_anywhere_reads_the_same_events(cuts, bom):
    """The stream reader (CappedText + httpx-sse) on a body cut at any byte, a BOM first or not, multi-byte
    characters cut in two: always the events of the whole body without the BOM, the first one included (#39 row 1)."""
    body = (b"\xef\xbb\xbf" if bom else b"") + _SSE_BODY
    points = sorted({0, len(body), *(min(c, len(body)) for c in cuts)})
    parts = [body[a:b] for a, b in zip(points, points[1:])]
    events = asyncio.run(_events(parts))
    assert events == asyncio.run(_events([_SSE_BODY]))
    assert events[0][1].startswith('{"choices"') and events[1] == ("error", '{"error": {"message": "é"}}')
