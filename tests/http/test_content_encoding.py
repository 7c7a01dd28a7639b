"""Issue #39 row 6: ``Content-Encoding: br``, ``zstd`` and unknown encodings, as a raw loopback server sends them.

br is decoded by the ``brotli`` package and zstd by ``zstandard`` (both through httpx's decoders); an encoding
nothing decodes is one line naming it, class ``unsupported_encoding``, not retried.
"""

from __future__ import annotations

import asyncio
import gzip
import json

import brotli
import pytest
import zstandard

from tests.http.raw_server import RawRequest, RawServer, completion
from verifier.http.client import EndpointClient
from verifier.records import EndpointConfig

BODY = {"messages": [{"role": "user", "content": "hi"}]}
ENCODERS = {"br": brotli.compress, "zstd": lambda b: zstandard.ZstdCompressor().compress(b), "gzip": gzip.compress}


def _sse(text: str) -> bytes:
    chunk = {"id": "x", "model": "m", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
    usage = {"id": "x", "model": "m", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    return f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode()


def _encoded_reply(encoding: str, encode, *, chunked: bool = False):
    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        stream = bool(req.json().get("stream"))
        raw = _sse("decoded fine") if stream else completion("decoded fine")
        body = encode(raw)
        ctype = "text/event-stream" if stream else "application/json"
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Encoding: {encoding}\r\n"
        if chunked:  # the encoded body cut into small chunks, as a streaming proxy sends it
            w.write(f"{head}Transfer-Encoding: chunked\r\n\r\n".encode())
            for i in range(0, len(body), 7):
                part = body[i:i + 7]
                w.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                await w.drain()
            w.write(b"0\r\n\r\n")
        else:
            w.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return reply


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("encoding", ["br", "zstd", "gzip"])
@pytest.mark.parametrize("chunked", [False, True])
async def test_br_and_zstd_bodies_are_decoded(encoding, stream, chunked):
    async with RawServer(_encoded_reply(encoding, ENCODERS[encoding], chunked=chunked)) as srv, \
            EndpointClient(EndpointConfig(name="ep", base_url=srv.url, model="m"), backoff_base=0.001) as c:
        ex = await c.chat(BODY, stream=stream)
    assert ex.ok, ex.error_message
    assert ex.content == "decoded fine" and ex.attempts == 1
    offered = {v.strip() for v in srv.requests[0].headers["accept-encoding"].split(",")}
    assert {"br", "zstd", "gzip"} <= offered  # the client offers what it decodes


@pytest.mark.parametrize("stream", [False, True])
async def test_unknown_encoding_is_named_in_one_line_and_not_retried(stream):
    async with RawServer(_encoded_reply("x-snappy-framed", lambda b: b"\xff\x06\x00\x00sNaPpY" + b)) as srv, \
            EndpointClient(EndpointConfig(name="ep", base_url=srv.url, model="m", max_attempts=4),
                           backoff_base=0.001) as c:
        ex = await c.chat(BODY, stream=stream)
    assert ex.error_class == "unsupported_encoding" and ex.status == 200
    assert ex.error_message == ("the response is Content-Encoding: x-snappy-framed, which verifier cannot decode "
                                "(it decodes gzip, deflate, br and zstd)")
    assert ex.attempts == 1 and len(srv.requests) == 1  # it would come back the same: not retried
    assert ex.content is None and ex.tool_calls == []  # nothing of the raw bytes is read as the model's reply


@pytest.mark.parametrize("stream", [False, True])
async def test_br_that_does_not_decode_names_the_encoding(stream):
    async with RawServer(_encoded_reply("br", lambda b: b"not brotli at all " * 4)) as srv, \
            EndpointClient(EndpointConfig(name="ep", base_url=srv.url, model="m", max_attempts=1),
                           backoff_base=0.001) as c:
        ex = await c.chat(BODY, stream=stream)
    assert not ex.ok and ex.content is None
    assert ex.error_message.startswith("the response body is not valid Content-Encoding br: DecodingError")


async def test_a_br_bomb_stops_at_the_response_cap():
    bomb = brotli.compress(b'{"a":"' + b"x" * (8 << 20) + b'"}')  # ~8 MiB of JSON from a few hundred bytes
    async with RawServer(_encoded_reply("br", lambda b: bomb)) as srv, \
            EndpointClient(EndpointConfig(name="ep", base_url=srv.url, model="m", max_response_bytes=1 << 20),
                           backoff_base=0.001) as c:
        ex = await c.chat(BODY, stream=False)
    assert len(bomb) < 4096
    assert ex.error_class == "response_too_large" and "after decompression" in ex.error_message
