"""Deadlines and the size cap bound every attempt, against a raw loopback server that really misbehaves."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import time

import pytest
from typer.testing import CliRunner

from tests.http.raw_server import RawRequest, RawServer, completion, http_response
from verifier.cli import app
from verifier.http.client import EndpointClient
from verifier.http.endpoints import EndpointConfigError, load_config
from verifier.records import EndpointConfig

BODY = {"messages": [{"role": "user", "content": "hi"}]}


def client(url: str, **kw) -> EndpointClient:
    return EndpointClient(EndpointConfig(name="ep", base_url=url, model="m", **kw), backoff_base=0.001)


async def _pinger(req: RawRequest, w: asyncio.StreamWriter) -> bool:
    """200 text/event-stream, one content chunk, then an SSE comment ping every 0.2 s, forever."""
    w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    first = f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': 'thinking'}}]})}\n\n".encode()
    w.write(b"%x\r\n%s\r\n" % (len(first), first))
    while True:
        await w.drain()
        await asyncio.sleep(0.2)
        w.write(b"8\r\n: ping\n\n\r\n")


async def test_total_deadline_ends_a_stream_that_keeps_pinging_then_retry_applies():
    async with RawServer(_pinger) as srv, client(srv.url, timeout=1, max_attempts=2) as c:
        t0 = time.perf_counter()
        ex = await c.chat(BODY, stream=True)
        elapsed = time.perf_counter() - t0
    assert ex.error_class == "timeout" and ex.status == 200, ex
    assert "total timeout (1 s)" in ex.error_message
    assert ex.attempts == 2 == len(srv.requests) and ex.retried_statuses == [0]
    assert 1.9 < elapsed < 5, elapsed  # two attempts of about 1 s each, not one of forever


async def test_one_attempt_with_pings_ends_in_about_the_total_timeout():
    async with RawServer(_pinger) as srv, client(srv.url, timeout=1, max_attempts=1) as c:
        t0 = time.perf_counter()
        ex = await c.chat(BODY, stream=True)
    assert ex.error_class == "timeout" and 0.95 < time.perf_counter() - t0 < 2.5


async def test_idle_read_timeout_is_separate_from_the_total():
    async def stall(req: RawRequest, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        await w.drain()
        await asyncio.sleep(30)

    async with RawServer(stall) as srv, client(srv.url, timeout=20, read_timeout=0.4, max_attempts=1) as c:
        t0 = time.perf_counter()
        ex = await c.chat(BODY)
    assert ex.error_class == "timeout" and "read_timeout (0.4 s)" in ex.error_message, ex.error_message
    assert time.perf_counter() - t0 < 3


async def test_connect_timeout_bounds_a_connect_that_never_completes():
    """A loopback listener whose accept queue is full drops further SYNs: the connect never completes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):  # fill the queue (backlog 0 still admits one or two)
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    await asyncio.sleep(0.2)
    try:
        async with client(f"http://127.0.0.1:{port}/v1", connect_timeout=0.3, timeout=20, max_attempts=1) as c:
            t0 = time.perf_counter()
            ex = await c.chat(BODY)
            elapsed = time.perf_counter() - t0
    finally:
        for s in [*fillers, listener]:
            s.close()
    assert ex.error_class == "timeout" and "connect_timeout (0.3 s)" in ex.error_message, ex
    assert elapsed < 3


@pytest.mark.parametrize("stream", [False, True])
async def test_gzip_body_that_inflates_past_the_cap_is_refused(stream):
    inflated = b" " * (40 * 1024 * 1024)  # 40 MB of spaces: about 40 KB gzipped
    packed = gzip.compress(inflated, compresslevel=9)
    assert len(packed) < 100_000

    async def bomb(req: RawRequest, w: asyncio.StreamWriter) -> None:
        ctype = "text/event-stream" if stream else "application/json"
        w.write(http_response(200, packed, ctype, extra="Content-Encoding: gzip\r\n"))

    async with RawServer(bomb) as srv, client(srv.url, max_response_bytes=1024 * 1024, max_attempts=3) as c:
        ex = await c.chat(BODY, stream=stream)
    assert ex.error_class == "response_too_large" and ex.attempts == 1, ex  # refused, not retried
    assert "1048576-byte" in ex.error_message


async def test_declared_length_over_the_cap_is_refused_before_reading():
    async def big(req: RawRequest, w: asyncio.StreamWriter) -> None:
        w.write(http_response(200, b" " * 300_000))

    async with RawServer(big) as srv, client(srv.url, max_response_bytes=100_000) as c:
        ex = await c.chat(BODY)
    assert ex.error_class == "response_too_large" and "Content-Length 300000" in ex.error_message


async def test_a_body_under_the_cap_is_read_whole():
    async def ok(req: RawRequest, w: asyncio.StreamWriter) -> None:
        w.write(http_response(200, gzip.compress(completion("x" * 50_000)), extra="Content-Encoding: gzip\r\n"))

    async with RawServer(ok) as srv, client(srv.url, max_response_bytes=100_000) as c:
        ex = await c.chat(BODY)
    assert ex.ok and ex.content == "x" * 50_000


@pytest.mark.parametrize("field", ["timeout", "connect_timeout", "write_timeout", "read_timeout", "max_response_bytes"])
@pytest.mark.parametrize("value", ["0", "-1"])
def test_zero_or_negative_deadline_in_endpoints_file_is_one_line(tmp_path, field, value):
    toml = tmp_path / "eps.toml"
    toml.write_text(f"[endpoints.a]\nbase_url = 'http://127.0.0.1:9/v1'\n{field} = {value}\n")
    with pytest.raises(EndpointConfigError) as e:
        load_config(toml)
    assert str(e.value).startswith(f"{toml}: endpoints.a.{field}: ") and "\n" not in str(e.value)


def test_timeout_zero_exits_2_with_one_line(tmp_path):
    toml = tmp_path / "eps.toml"
    toml.write_text("[endpoints.a]\nbase_url = 'http://127.0.0.1:9/v1'\ntimeout = 0\n")
    res = CliRunner().invoke(app, ["run", "--config", str(toml), "--no-history", "-q", "--out", str(tmp_path / "r")],
                             catch_exceptions=False)
    assert res.exit_code == 2
    assert res.stderr.strip() == f"error: {toml}: endpoints.a.timeout: Input should be greater than 0"


def test_resume_keeps_every_deadline_and_the_size_cap(tmp_path):
    """The manifest stores each endpoint's deadlines and response cap, so ``--resume`` without ``--config`` runs
    the rest of the run under the same limits as its first part (not the defaults)."""
    from verifier.http.endpoints import EndpointSet
    from verifier.records import EndpointConfig
    from verifier.run.manifest_endpoints import endpoints_from_manifest, manifest_endpoints
    from verifier.run.store import RunManifest

    cfg = EndpointConfig(name="ref", base_url="http://127.0.0.1:9/v1", model="m", timeout=7.5, connect_timeout=1.5,
                         write_timeout=2.5, read_timeout=3.5, max_response_bytes=12345)
    manifest = RunManifest(run_id="r", started_at="2026-12-06T00:00:00Z", reference="ref",
                           endpoints=manifest_endpoints(EndpointSet([cfg], "ref", {"ref": cfg.base_url})), suites=[])
    manifest.write(tmp_path)
    back = endpoints_from_manifest(RunManifest.model_validate_json((tmp_path / "manifest.json").read_text()), None)
    assert back.get("ref").model_dump() == cfg.model_dump()
