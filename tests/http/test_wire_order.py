"""Issue #31 §1: what goes on the wire is the suite line, keys in the order written at every depth.

Chat templates render tool schemas in key order, so a client that sorts keys changes the prompt. A raw
loopback server keeps the request bytes; their key order (read with ``object_pairs_hook``) must equal the
line's, with only the run's own additions (model, stream, stream_options) after them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.http.raw_server import RawRequest, RawServer, completion, http_response
from verifier.http.client import EndpointClient, request_hash
from verifier.kinds.toolcall.suite_format import load_jsonl
from verifier.records import EndpointConfig

# deliberately unsorted at every depth: body, messages, tools, function, parameters, properties, enum order
LINE = ('{"tools":[{"type":"function","function":{"parameters":{"type":"object","required":["zeta","alpha"],'
        '"properties":{"zeta":{"type":"string","description":"last letter"},"alpha":{"enum":["b","a"],'
        '"type":"string"}}},"name":"pick","description":"Pick one."}}],'
        '"temperature":0,"messages":[{"role":"_input","content":"You pick."},{"content":"pick b","role":"user"}],'
        '"tool_choice":"auto","max_tokens":64,"_meta":{"id":"c1"}}')


def key_paths(value: Any, path: str = "$") -> list[tuple[str, list[str]]]:
    """Every object's path and its keys in order, depth first (keys read in wire order)."""
    out: list[tuple[str, list[str]]] = []
    if isinstance(value, list) and value and isinstance(value[0], tuple):  # an object from object_pairs_hook
        out.append((path, [k for k, _ in value]))
        for k, v in value:
            out += key_paths(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += key_paths(v, f"{path}[{i}]")
    return out


def ordered(raw: bytes | str) -> Any:
    return json.loads(raw, object_pairs_hook=lambda pairs: pairs)


@pytest.mark.parametrize("stream", [False, True])
async def test_received_key_order_equals_the_line(tmp_path, stream):
    suite = tmp_path / "s.jsonl"
    suite.write_text(LINE + "\n")
    case = load_jsonl(suite).cases[0]

    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        if stream:
            data = b'data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
            w.write(http_response(200, data, "text/event-stream"))
        else:
            w.write(http_response(200, completion("b")))

    async with RawServer(reply) as srv:
        cfg = EndpointConfig(name="ep", base_url=srv.url, model="m", extra_body={"seed": 7})
        async with EndpointClient(cfg) as c:
            ex = await c.chat(case.body, stream=stream)
    assert ex.ok
    got = key_paths(ordered(srv.requests[0].body))
    line_body = [(p, ks) for p, ks in key_paths(ordered(LINE))]
    want = []
    for path, keys in line_body:
        if path == "$":
            keys = [k for k in keys if k != "_meta"] + ["model", "stream", "seed"] + (["stream_options"]
                                                                                      if stream else [])
        if path.startswith("$._meta"):
            continue
        want.append((path, keys))
    if stream:
        want.append(("$.stream_options", ["include_usage"]))
    assert got == want
    sent = json.loads(srv.requests[0].body)
    # the K2VV role is the only change inside messages
    assert sent["messages"] == [{"role": "system", "content": "You pick."}, {"content": "pick b", "role": "user"}]
    # the hash is over the canonical form: the same body with keys sorted has the same hash
    assert ex.request_hash == request_hash(json.loads(json.dumps(sent, sort_keys=True)))


def test_loader_keeps_key_order(tmp_path):
    suite = tmp_path / "s.jsonl"
    suite.write_text(LINE + "\n")
    body = load_jsonl(suite).cases[0].body
    assert list(body) == ["tools", "temperature", "messages", "tool_choice", "max_tokens"]
    fn = body["tools"][0]["function"]
    assert list(fn) == ["parameters", "name", "description"]
    assert list(fn["parameters"]["properties"]) == ["zeta", "alpha"]
