"""The library HTTP stack (httpx on aiohttp) against a raw loopback server that really sends hostile bytes.

Each exchange must end as a classified record (never an exception escaping the client), each record must
hold its own case's reply, and every request the server received must be counted in ``attempts``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time

import httpx
import pytest

from tests.http.raw_server import RawRequest, RawServer, completion, http_response
from verifier.http.client import EndpointClient
from verifier.http.stack import HttpStack, LibraryTransport
from verifier.records import EndpointConfig

BODY = {"messages": [{"role": "user", "content": "hi"}]}


def cfg(url: str, **kw) -> EndpointConfig:
    return EndpointConfig(name="ep", base_url=url, model="m", **kw)


def client(url: str, **kw) -> EndpointClient:
    return EndpointClient(cfg(url, **kw), backoff_base=0.001)


@pytest.mark.parametrize("stream", [False, True])
async def test_early_hints_never_shift_replies_between_cases(stream):
    """A 103 before every 200: each of 40 records holds its own case's reply (the old transport shifted 28 %)."""

    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        tag = req.json()["messages"][0]["content"]
        w.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
        await w.drain()
        if stream:
            chunk = {"id": "x", "model": "m", "choices": [{"index": 0, "delta": {"content": f"echo {tag}"},
                                                           "finish_reason": "stop"}]}
            data = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
            w.write(http_response(200, data, "text/event-stream"))
        else:
            w.write(http_response(200, completion(f"echo {tag}")))

    async with RawServer(reply) as srv, client(srv.url, concurrency=4) as c:
        bodies = [{"messages": [{"role": "user", "content": f"case-{i}"}]} for i in range(40)]
        exs = await asyncio.gather(*(c.chat(b, stream=stream) for b in bodies))
    assert [e.content for e in exs] == [f"echo case-{i}" for i in range(40)]
    assert all(e.ok and e.attempts == 1 for e in exs)
    assert len(srv.requests) == 40


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("bad", ["negative_content_length", "huge_chunk_size_line", "bad_status_line"])
async def test_malformed_framing_is_a_classified_record(bad, stream):
    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> bool:
        if bad == "negative_content_length":
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: -5\r\n\r\n{}")
        elif bad == "huge_chunk_size_line":
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + b"f" * (1 << 20) + b"\r\n")
        else:
            w.write(b"HTTQ/9 abc\r\n\r\n")
        return False

    async with RawServer(reply) as srv, client(srv.url, max_attempts=2) as c:
        ex = await c.chat(BODY, stream=stream)
    assert not ex.ok and ex.error_class == "protocol_error", ex
    assert ex.error_message.startswith("MalformedHTTP: malformed HTTP response")
    assert ex.attempts == 2 == len(srv.requests)  # retried once, and every POST on the wire is counted


async def test_server_that_never_reads_is_bounded_by_the_write_timeout():
    # more than the client's send buffer can hold (the server reads nothing and keeps a fixed 64 KiB window)
    big = {"messages": [{"role": "user", "content": "x" * (32 * 1024 * 1024)}]}
    async with RawServer(lambda r, w: asyncio.sleep(0), read_requests=False) as srv, \
            client(srv.url, write_timeout=0.5, timeout=30, max_attempts=1, max_response_bytes=1024) as c:
        t0 = time.perf_counter()
        ex = await c.chat(big)
    elapsed = time.perf_counter() - t0
    assert ex.error_class == "timeout" and "write_timeout (0.5 s)" in ex.error_message, ex.error_message
    assert 0.4 < elapsed < 5, elapsed


async def test_server_that_never_answers_is_bounded_by_the_total_timeout():
    async with RawServer(lambda r, w: asyncio.sleep(0), read_requests=False) as srv, \
            client(srv.url, timeout=0.6, max_attempts=2) as c:
        t0 = time.perf_counter()
        ex = await c.chat(BODY)
    assert ex.error_class == "timeout" and "total timeout (0.6 s)" in ex.error_message
    assert ex.attempts == 2 and ex.retried_statuses == [0]
    assert 1.1 < time.perf_counter() - t0 < 5


async def test_disconnect_before_reply_is_a_connection_error_not_a_timeout():
    """httpx-aiohttp maps a server disconnect to ConnectTimeout; the stack must say what happened."""

    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> bool:
        return False  # close without a byte

    async with RawServer(reply) as srv, client(srv.url, max_attempts=3) as c:
        ex = await c.chat(BODY)
    assert ex.error_class == "connection" and ex.status is None
    assert ex.attempts == 3 == len(srv.requests) and ex.retried_statuses == [0, 0]


async def test_cut_body_mid_stream_is_a_broken_stream():
    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> bool:
        chunk = {"choices": [{"index": 0, "delta": {"content": "par"}}]}
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 5000\r\n\r\n"
                + f"data: {json.dumps(chunk)}\n\n".encode())
        return False

    async with RawServer(reply) as srv, client(srv.url, max_attempts=1) as c:
        ex = await c.chat(BODY, stream=True)
    assert ex.error_class == "broken_stream" and ex.status == 200 and ex.attempts == 1


async def test_limits_cap_connections_and_keep_alive_reuses_them():
    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.02)
        w.write(http_response(200, completion("ok")))

    async with RawServer(reply) as srv, client(srv.url, concurrency=3) as c:
        exs = await asyncio.gather(*(c.chat(BODY) for _ in range(30)))
    assert all(e.ok for e in exs) and len(srv.requests) == 30
    assert srv.max_open <= 3 and srv.connections <= 3  # Limits.max_connections honoured, sockets reused


async def test_pool_timeout_is_honoured():
    """With one connection busy, a second request waits for the pool at most ``Timeout.pool`` seconds."""

    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(2)
        w.write(http_response(200, b"{}"))

    async with RawServer(reply) as srv:
        stack = HttpStack(base_url=srv.url, headers={}, timeout=httpx.Timeout(10, pool=0.3),
                          limits=httpx.Limits(max_connections=1))
        assert isinstance(stack.transport, LibraryTransport)  # requests go straight to it (HttpStack.send)
        try:
            first = asyncio.create_task(stack.send(stack.client.build_request("POST", srv.url + "/x", content=b"{}")))
            await asyncio.sleep(0.1)
            t0 = time.perf_counter()
            with pytest.raises(httpx.TimeoutException):
                await stack.send(stack.client.build_request("POST", srv.url + "/y", content=b"{}"))
            assert time.perf_counter() - t0 < 1.5
            first.cancel()
        finally:
            await stack.aclose()


async def test_redirect_is_recorded_with_status_and_location_never_followed():
    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        w.write(http_response(307, b"", extra="Location: https://other.example/v1/chat/completions\r\n",
                              reason="Temporary Redirect"))

    async with RawServer(reply) as srv, client(srv.url, max_attempts=3) as c:
        ex = await c.chat(BODY)
    assert ex.status == 307 and ex.error_class == "redirect" and ex.attempts == 1 == len(srv.requests)
    assert "HTTP 307" in ex.error_message and "https://other.example/v1/chat/completions" in ex.error_message


@pytest.mark.parametrize("library_transport", [True, False])
async def test_url_userinfo_is_sent_as_basic_credentials_on_either_transport(library_transport):
    """Requests go straight to the aiohttp transport, past ``AsyncClient.send``, which is where httpx turns URL
    userinfo into Basic credentials: the stack must add them itself, exactly as httpx's own path does."""

    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        w.write(http_response(200, completion("ok")))

    async with RawServer(reply) as srv:
        url = srv.url.replace("http://", "http://alice:s%40cret@")
        async with EndpointClient(cfg(url), library_transport=library_transport) as c:
            ex = await c.chat(BODY)
        async with EndpointClient(cfg(srv.url), api_key="k-123", library_transport=library_transport) as c:
            keyed = await c.chat(BODY)
    assert ex.ok and keyed.ok
    basic = base64.b64encode(b"alice:s@cret").decode()
    assert [r.headers.get("authorization") for r in srv.requests] == [f"Basic {basic}", "Bearer k-123"]
