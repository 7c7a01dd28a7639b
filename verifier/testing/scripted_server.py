"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks.

Why a hand-rolled HTTP/1.1 server on ``asyncio`` streams instead of a framework: the tests must control the
wire byte by byte (cut a stream mid-way without the terminating chunk, emit a malformed SSE line, delay a
chunk), and the throughput benchmark needs a server whose own cost is small next to the client's. The server
runs in a thread with its own event loop, so it works the same from sync tests, async tests and scripts.

Each request is answered by a ``responder(body, ctx) -> Reply`` callable; :class:`FaultInjector` wraps a
responder and injects 429 (with Retry-After), 500, truncated streams, malformed argument JSON and schema
violations at chosen rates. Its decisions depend only on (seed, request hash, attempt), never on arrival
order, so a concurrent run injects exactly the same faults every time and tests can assert exact counts.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from verifier.testing.replies import Reply, RequestContext, Responder, body_hash
from verifier.testing.responders import schema_responder

_REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 408: "Request Timeout",
    411: "Length Required", 422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
    502: "Bad Gateway", 503: "Service Unavailable",
}


# ----------------------------------------------------------------------------------------------------------
# Building OpenAI bodies and SSE streams from a Reply
# ----------------------------------------------------------------------------------------------------------

def _default_usage() -> dict[str, Any]:
    return {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19,
            "prompt_tokens_details": {"cached_tokens": 0}}


def _norm_calls(reply: Reply, rid: str) -> list[dict[str, Any]]:
    calls = []
    for i, tc in enumerate(reply.tool_calls or []):
        args = tc.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, separators=(",", ":"))
        calls.append({"index": i, "id": tc.get("id", f"call_{rid[-8:]}_{i}"), "type": "function",
                      "function": {"name": tc.get("name"), "arguments": args}})
    return calls


def _finish(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def completion_body(reply: Reply, body: dict, rid: str) -> dict[str, Any]:
    """The non-streamed chat completion a Reply stands for."""
    msg: dict[str, Any] = {"role": "assistant", "content": reply.content}
    calls = _norm_calls(reply, rid)
    if calls:
        msg["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
    if reply.reasoning_content is not None:
        msg["reasoning_content"] = reply.reasoning_content
    choice: dict[str, Any] = {"index": 0, "message": msg, "finish_reason": _finish(reply)}
    choice["logprobs"] = {"content": reply.logprobs} if reply.logprobs is not None else None
    out = {"id": rid, "object": "chat.completion", "created": int(time.time()),
           "model": reply.model or body.get("model") or "scripted", "choices": [choice]}
    usage = reply.usage if reply.usage is not None else _default_usage()
    if usage:
        out["usage"] = usage
    return out


def stream_events(reply: Reply, body: dict, rid: str) -> list[str]:
    """The SSE data payloads OpenAI would send for this Reply, in order (without the final [DONE])."""
    model = reply.model or body.get("model") or "scripted"
    created = int(time.time())

    def chunk(delta: dict | None, finish: str | None = None, **extra: Any) -> str:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, **extra}]
        return json.dumps({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": choices}, separators=(",", ":"))

    events = [chunk({"role": "assistant", "content": ""})]
    if reply.reasoning_content:
        for piece in _split(reply.reasoning_content, 2):
            events.append(chunk({"reasoning_content": piece}))
    if reply.content:
        lps = reply.logprobs
        pieces = _split(reply.content, 3)
        for j, piece in enumerate(pieces):
            extra: dict[str, Any] = {"logprobs": {"content": lps}} if (lps is not None and j == 0) else {}
            events.append(chunk({"content": piece}, **extra))
    for c in _norm_calls(reply, rid):
        events.append(chunk({"tool_calls": [{"index": c["index"], "id": c["id"], "type": "function",
                                             "function": {"name": c["function"]["name"], "arguments": ""}}]}))
        for piece in _split(c["function"]["arguments"], reply.argument_pieces):
            events.append(chunk({"tool_calls": [{"index": c["index"], "function": {"arguments": piece}}]}))
    events.append(chunk({}, _finish(reply)))
    want_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    usage = reply.usage if reply.usage is not None else _default_usage()
    if want_usage and reply.stream_usage and usage:
        events.append(json.dumps({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                                  "choices": [], "usage": usage}, separators=(",", ":")))
    return events


def _split(s: str, n: int) -> list[str]:
    if not s:
        return []
    n = max(1, min(n, len(s)))
    step = -(-len(s) // n)
    return [s[i:i + step] for i in range(0, len(s), step)]


# ----------------------------------------------------------------------------------------------------------
# The server
# ----------------------------------------------------------------------------------------------------------

class ScriptedServer:
    """Context manager: ``with ScriptedServer(responder) as srv: srv.base_url`` (ends in ``/v1``).

    ``api_key``: when set, requests without ``Authorization: Bearer <api_key>`` get 401.
    ``models``: ids served by ``GET /v1/models``. ``echo_auth_in_errors``: a hostile server that repeats the
    presented Authorization header in its 401 body, to test that clients keep keys out of their records.
    """

    def __init__(self, responder: Responder = schema_responder, *, api_key: str | None = None,
                 models: list[str] | None = None, echo_auth_in_errors: bool = False, port: int = 0) -> None:
        self.responder = responder
        self.api_key = api_key
        self.models = models if models is not None else ["scripted-model"]
        self.echo_auth_in_errors = echo_auth_in_errors
        self.port = port
        self.request_count = 0
        self.connection_count = 0
        self.attempts: collections.Counter = collections.Counter()
        self.log: list[tuple[str, str, dict | None]] = []  # (method, path, body) per request
        self.keep_log = True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self._run, name="scripted-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("scripted server did not start")
        return self

    def stop(self) -> None:
        server = self._server
        if self._loop and server:
            async def _close() -> None:
                server.close()
                for w in list(self._writers):
                    w.transport.abort()
                await server.wait_closed()
            asyncio.run_coroutine_threadsafe(_close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._server = None
        if self._thread:
            self._thread.join(10)
            self._thread = None

    def serve_forever(self, banner: Callable[[], str]) -> None:
        """Start without a request log, print ``banner()`` (it may name the port), serve until Ctrl-C."""
        self.keep_log = False
        self.start()
        print(banner(), flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            self.stop()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", self.port, backlog=1024))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    # HTTP ------------------------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        self.connection_count += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                try:
                    method, target, _ = lines[0].split(" ", 2)
                except ValueError:
                    return
                headers = {}
                for ln in lines[1:]:
                    if ":" in ln:
                        k, v = ln.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                length = int(headers.get("content-length", "0") or 0)
                raw = await reader.readexactly(length) if length else b""
                keep = await self._respond(writer, method, target.split("?", 1)[0], headers, raw)
                if not keep or headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - best-effort close of a possibly aborted transport
                pass

    async def _send(self, writer: asyncio.StreamWriter, status: int, payload: bytes, headers: dict[str, str],
                    content_type: str = "application/json") -> None:
        hdr = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}", f"Content-Type: {content_type}",
               f"Content-Length: {len(payload)}"]
        hdr += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(hdr) + "\r\n\r\n").encode("latin-1") + payload)
        await writer.drain()

    async def _respond(self, writer: asyncio.StreamWriter, method: str, path: str, headers: dict[str, str],
                       raw: bytes) -> bool:
        idx = self.request_count
        self.request_count += 1
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            msg = "invalid api key"
            if self.echo_auth_in_errors:
                msg += f": you sent {headers.get('authorization', '')!r}"
            error = {"message": msg, "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}
            await self._send(writer, 401, json.dumps({"error": error}).encode(), {})
            return True
        if method == "GET" and path.rstrip("/") == "/v1/models":
            data = {"object": "list",
                    "data": [{"id": m, "object": "model", "owned_by": "scripted"} for m in self.models]}
            await self._send(writer, 200, json.dumps(data).encode(), {})
            return True
        if method != "POST":
            await self._send(writer, 404, b'{"error":{"message":"not found","type":"not_found"}}', {})
            return True
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            await self._send(writer, 400, b'{"error":{"message":"body is not JSON","type":"invalid_request_error"}}',
                             {})
            return True
        key = body_hash(body)
        self.attempts[(path, key)] += 1
        if self.keep_log:
            self.log.append((method, path, body))
        ctx = RequestContext(method, path, headers, idx, self.attempts[(path, key)], key, self)
        model = body.get("model")
        if self.models and model is not None and model not in self.models and path.endswith("/chat/completions"):
            reply = Reply.error(404, f"The model `{model}` does not exist", type_="not_found_error")
        else:
            reply = self.responder(body, ctx)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        rid = f"chatcmpl-{idx:08d}"
        if reply.body is not None or reply.status != 200:
            payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            await self._send(writer, reply.status, payload, reply.headers)
            return True
        if body.get("stream"):
            return await self._stream(writer, reply, body, rid)
        await self._send(writer, 200, json.dumps(completion_body(reply, body, rid), separators=(",", ":")).encode(),
                         reply.headers)
        return True

    async def _stream(self, writer: asyncio.StreamWriter, reply: Reply, body: dict, rid: str) -> bool:
        hdr = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream", "Cache-Control: no-cache",
               "Transfer-Encoding: chunked"] + [f"{k}: {v}" for k, v in reply.headers.items()]
        writer.write(("\r\n".join(hdr) + "\r\n\r\n").encode("latin-1"))
        if reply.sse_bytes is not None:
            writer.write((_chunk(reply.sse_bytes) if reply.sse_bytes else b"") + b"0\r\n\r\n")
            await writer.drain()
            return True
        events = reply.raw_events if reply.raw_events is not None else stream_events(reply, body, rid)
        for i, ev in enumerate(events):
            if reply.truncate_after_chunks is not None and i >= reply.truncate_after_chunks:
                await writer.drain()
                writer.transport.abort()  # no terminating chunk: the client sees a broken stream
                return False
            if reply.malformed_chunk_at is not None and i == reply.malformed_chunk_at:
                writer.write(_chunk(b"data: {this is not json\n\n"))
            writer.write(_chunk(f"data: {ev}\n\n".encode()))
            if reply.chunk_delay_s:
                await writer.drain()
                await asyncio.sleep(reply.chunk_delay_s)
        writer.write((_chunk(b"data: [DONE]\n\n") if reply.send_done else b"") + b"0\r\n\r\n")
        await writer.drain()
        return True


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def main() -> None:
    """Serve from a separate process (the benchmark does this so server CPU is not counted as client CPU)."""
    ap = argparse.ArgumentParser(description="scripted OpenAI-compatible server on 127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    srv = ScriptedServer(schema_responder, port=args.port)
    srv.serve_forever(lambda: f"PORT {srv.port}")


if __name__ == "__main__":
    main()
