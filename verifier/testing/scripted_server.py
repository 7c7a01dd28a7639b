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
import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

Responder = Callable[[dict, "RequestContext"], "Reply"]

_REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 408: "Request Timeout",
    411: "Length Required", 422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
    502: "Bad Gateway", 503: "Service Unavailable",
}


def body_hash(body: dict) -> str:
    """Hash of a request body ignoring transport fields, so stream/non-stream and retries share one identity."""
    core = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    return hashlib.sha256(json.dumps(core, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass
class RequestContext:
    """What the responder may look at besides the body."""

    method: str
    path: str
    headers: dict[str, str]
    request_index: int  # global arrival order (0-based)
    attempt: int  # 1 for the first time this body hash arrives at this path, 2 for its first retry, ...
    body_hash: str
    server: "ScriptedServer"


@dataclass
class Reply:
    """A scripted answer. Chat fields build an OpenAI completion; ``body`` overrides with a raw JSON body."""

    status: int = 200
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None  # {"name", "arguments": str | dict, "id"?}
    finish_reason: str | None = None  # default: "tool_calls" when tool_calls else "stop"
    reasoning_content: str | None = None
    usage: dict[str, Any] | None = None  # default: small OpenAI usage with prompt_tokens_details.cached_tokens=0
    logprobs: list[dict[str, Any]] | None = None
    body: Any = None  # raw JSON-able body (or bytes) for non-chat answers and errors
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # before the response starts
    chunk_delay_s: float = 0.0  # between stream chunks
    truncate_after_chunks: int | None = None  # stream: drop the connection after N data events (no [DONE])
    malformed_chunk_at: int | None = None  # stream: emit a non-JSON data line before event N
    stream_usage: bool = True  # stream: send the usage chunk when the client asked for it
    send_done: bool = True  # stream: end with ``data: [DONE]`` (False: the body ends cleanly without it)
    argument_pieces: int = 3  # stream: split each tool call's arguments into this many deltas
    raw_events: list[str] | None = None  # stream: send these SSE data payloads verbatim (hostile streams), then [DONE]
    model: str | None = None

    @classmethod
    def text(cls, content: str, **kw: Any) -> "Reply":
        return cls(content=content, **kw)

    @classmethod
    def tool_call(cls, name: str, arguments: dict | str, **kw: Any) -> "Reply":
        return cls(tool_calls=[{"name": name, "arguments": arguments}], **kw)

    @classmethod
    def error(cls, status: int, message: str = "scripted error", *, retry_after: float | None = None,
              type_: str = "scripted_error") -> "Reply":
        headers = {"Retry-After": _fmt_seconds(retry_after)} if retry_after is not None else {}
        return cls(status=status, body={"error": {"message": message, "type": type_, "param": None, "code": status}},
                   headers=headers)


def _fmt_seconds(s: float) -> str:
    return str(int(s)) if float(s).is_integer() else repr(float(s))


# ----------------------------------------------------------------------------------------------------------
# Building OpenAI bodies and SSE streams from a Reply
# ----------------------------------------------------------------------------------------------------------

def _default_usage() -> dict[str, Any]:
    return {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19, "prompt_tokens_details": {"cached_tokens": 0}}


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
            extra = {"logprobs": {"content": lps}} if (lps is not None and j == 0) else {}
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
# Responders
# ----------------------------------------------------------------------------------------------------------

def _regex_example(pattern: str) -> str | None:
    """A short string matching ``pattern`` (walks Python's parsed regex: first branch, minimum repeats)."""
    import re
    from re import _constants as C, _parser as P  # noqa: N812 - stdlib's own regex parser

    cat = {C.CATEGORY_DIGIT: "0", C.CATEGORY_WORD: "a", C.CATEGORY_SPACE: " ", C.CATEGORY_NOT_DIGIT: "a",
           C.CATEGORY_NOT_WORD: "-", C.CATEGORY_NOT_SPACE: "a"}

    def gen(items: Any) -> str:
        out = []
        for op, av in items:
            if op is C.LITERAL:
                out.append(chr(av))
            elif op is C.NOT_LITERAL:
                out.append("a" if av != ord("a") else "b")
            elif op is C.ANY:
                out.append("a")
            elif op is C.IN:
                first = av[0]
                if first[0] is C.NEGATE:
                    out.append("a" if not any(o is C.LITERAL and v == ord("a") for o, v in av[1:]) else "b")
                elif first[0] is C.LITERAL:
                    out.append(chr(first[1]))
                elif first[0] is C.RANGE:
                    out.append(chr(first[1][0]))
                elif first[0] is C.CATEGORY:
                    out.append(cat.get(first[1], "a"))
                else:
                    out.append("a")
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
                lo, _hi, sub = av
                out.append(gen(sub) * max(lo, 0))
            elif op is C.SUBPATTERN:
                out.append(gen(av[-1]))
            elif op is C.BRANCH:
                out.append(gen(av[1][0]))
            elif op is C.CATEGORY:
                out.append(cat.get(av, "a"))
        return "".join(out)

    try:
        candidate = gen(P.parse(pattern))
        return candidate if re.search(pattern, candidate) else None
    except Exception:  # noqa: BLE001 - exotic patterns: the caller falls back
        return None


def _instance(schema: dict, depth: int = 0, root: dict | None = None) -> Any:
    """A small value valid against a JSON Schema (the subset tool schemas use)."""
    root = schema if root is None else root
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and depth < 20:
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _instance(target, depth + 1, root)
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _instance(schema[key][0], depth + 1, root)
    t = schema.get("type", "object")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t == "object":
        props = schema.get("properties") or {}
        keys = list(schema.get("required", []))
        for k in props:  # honour minProperties with optional properties
            if len(keys) >= schema.get("minProperties", 0):
                break
            if k not in keys:
                keys.append(k)
        return {k: _instance(props.get(k, {}), depth + 1, root) for k in keys}
    if t == "array":
        prefix = [_instance(p, depth + 1, root) for p in schema.get("prefixItems") or []]
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {"type": "string"}
        return prefix + [_instance(items, depth + 1, root) for _ in range(max(0, schema.get("minItems", 0) - len(prefix)))]
    if t == "integer":
        if "exclusiveMinimum" in schema:
            return int(schema["exclusiveMinimum"]) + 1
        return int(schema.get("minimum", 1))
    if t == "number":
        if "exclusiveMinimum" in schema:
            return float(schema["exclusiveMinimum"]) + 0.5
        return float(schema.get("minimum", 1.5))
    if t == "boolean":
        return True
    if t == "null":
        return None
    if isinstance(schema.get("pattern"), str):
        found = _regex_example(schema["pattern"])
        if found is not None:
            return found
    fmt = {"date": "2024-01-31", "date-time": "2024-01-31T12:00:00Z", "email": "a@example.com",
           "uri": "https://example.com/", "time": "12:00:00"}.get(schema.get("format", ""))
    return fmt or "x" * max(1, int(schema.get("minLength", 1)))


def schema_responder(body: dict, ctx: RequestContext) -> Reply:
    """A deterministic stand-in model: calls the forced (or first) tool with minimal valid arguments.

    Requests whose last user message hashes into the bottom quarter get a text answer instead, so trigger
    metrics see both outcomes; ``tool_choice: "none"`` always gets text.
    """
    tools = body.get("tools") or []
    choice = body.get("tool_choice")
    if not tools or choice == "none":
        return Reply.text("No tool needed.")
    forced = None
    if isinstance(choice, dict):
        forced = (choice.get("function") or {}).get("name")
    if forced is None and choice != "required" and int(ctx.body_hash[:2], 16) < 64:
        return Reply.text("I can answer that without a tool.")
    fn = next((t["function"] for t in tools if t.get("function", {}).get("name") == forced), tools[0].get("function", {}))
    return Reply.tool_call(fn.get("name", "unknown"), _instance(fn.get("parameters") or {}))


@dataclass
class FaultInjector:
    """Wraps a responder and injects faults at chosen rates, deterministically per (seed, request, attempt).

    ``rates`` keys: ``"429"`` (with Retry-After = ``retry_after``), ``"500"``, ``"truncate"`` (streams only:
    connection dropped after two events), ``"malformed_args"`` (argument JSON cut in half), ``"schema_violation"``
    (required arguments removed, or a property given the wrong type). At most one fault per attempt, tried in
    that order. Per-request faults, the same on every attempt (so no retry gets through): ``"permanent_500"``,
    ``"hostile_body"`` (a 200 whose JSON body or SSE data lines have shapes no parser foresaw, see
    :data:`HOSTILE_BODIES` and :data:`HOSTILE_STREAMS`) and ``"lone_surrogate"`` (content or arguments carrying a
    lone UTF-16 surrogate, and a non-BMP character split across two deltas). Transport faults (429/500/truncate) apply to first attempts only unless ``every_attempt``, so a
    retrying client always gets through and totals are exact. Content faults are decided per request (every
    attempt of a request gets the same one). ``injected`` counts what was injected: transport faults per attempt,
    content faults per request.
    """

    inner: Responder
    rates: dict[str, float]
    seed: int = 0
    retry_after: float = 0.01
    every_attempt: bool = False
    injected: collections.Counter = field(default_factory=collections.Counter)
    injected_keys: dict[str, set] = field(default_factory=lambda: collections.defaultdict(set))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def draw(self, key: str, attempt: int, fault: str) -> bool:
        rate = self.rates.get(fault, 0.0)
        if rate <= 0:
            return False
        return random.Random(f"{self.seed}|{key}|{attempt}|{fault}").random() < rate

    def _count(self, fault: str, key: str, *, once_per_request: bool = False) -> None:
        with self._lock:
            if once_per_request and key in self.injected_keys[fault]:
                return  # content faults repeat on every attempt of a request; they reach the records once
            self.injected[fault] += 1
            self.injected_keys[fault].add(key)

    def __call__(self, body: dict, ctx: RequestContext) -> Reply:
        key = ctx.body_hash
        if self.draw(key, 0, "permanent_500"):
            self._count("permanent_500", key, once_per_request=True)
            return Reply.error(500, "server error (injected, permanent)", type_="server_error")
        if self.draw(key, 0, "hostile_body"):
            self._count("hostile_body", key, once_per_request=True)
            pick = random.Random(f"{self.seed}|{key}|hostile").randrange(len(HOSTILE_BODIES))
            if body.get("stream"):
                return Reply(raw_events=HOSTILE_STREAMS[pick % len(HOSTILE_STREAMS)])
            return Reply(body=HOSTILE_BODIES[pick])
        transport_ok = self.every_attempt or ctx.attempt == 1
        if transport_ok and self.draw(key, ctx.attempt, "429"):
            self._count("429", key)
            return Reply.error(429, "rate limited (injected)", retry_after=self.retry_after, type_="rate_limit")
        if transport_ok and self.draw(key, ctx.attempt, "500"):
            self._count("500", key)
            return Reply.error(500, "server error (injected)", type_="server_error")
        reply = self.inner(body, ctx)
        if transport_ok and body.get("stream") and self.draw(key, ctx.attempt, "truncate"):
            self._count("truncate", key)
            reply.truncate_after_chunks = 2
        if reply.tool_calls and self.draw(key, 0, "malformed_args"):
            self._count("malformed_args", key, once_per_request=True)
            for tc in reply.tool_calls:
                a = tc["arguments"] if isinstance(tc["arguments"], str) else json.dumps(tc["arguments"])
                tc["arguments"] = a[: max(1, len(a) // 2)]
        elif self.draw(key, 0, "lone_surrogate"):
            self._count("lone_surrogate", key, once_per_request=True)
            if reply.tool_calls:  # "\ud83d\ude00" once the JSON is read: a pair the stream splits in two deltas
                # 15 characters in two deltas of 8 and 7: the pair is cut between its halves, as JS/Java servers do
                reply.tool_calls = [{**tc, "arguments": '{"n": "\ud83d\ude00 \ud83dxx"}'} for tc in reply.tool_calls]
                reply.argument_pieces = 2
            else:
                reply.content = (reply.content or "") + " \ud83d"
        elif reply.tool_calls and self.draw(key, 0, "schema_violation"):
            self._count("schema_violation", key, once_per_request=True)
            tools = {t.get("function", {}).get("name"): t.get("function", {}) for t in body.get("tools") or []}
            for tc in reply.tool_calls:
                tc["arguments"] = _violate((tools.get(tc["name"]) or {}).get("parameters") or {}, tc["arguments"])
        return reply


#: 200 bodies with shapes a parser must survive: each must end as a classified record or a scored one, never a crash.
HOSTILE_BODIES: list[Any] = [
    {"choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": 7}, "finish_reason": {}}]},
    {"choices": ["not a choice"]},
    {"choices": {"0": {"message": {}}}},
    {"choices": [{"message": {"tool_calls": [{"function": {"name": {"n": 1}, "arguments": {"a": [1]}}, "id": 5}]},
                  "finish_reason": ["tool_calls"]}], "usage": {"input_tokens": 3, "cache_read_input_tokens": "many"}},
    [1, 2, 3],
    "just a string",
    {"choices": [{"message": {"content": {"nested": True}, "reasoning": 3}, "logprobs": {"content": "x"},
                  "finish_reason": 0}]},
    {"error": None, "choices": []},
]

#: SSE data payload lists sent verbatim on a 200 stream (then ``[DONE]``).
HOSTILE_STREAMS: list[list[str]] = [
    ["{not json", "oops", "[1, 2]", "null"],
    ['{"choices": [{"index": 0, "delta": {"tool_calls": 7}, "finish_reason": {}}]}'],
    ['{"choices": "nope"}', '{"choices": [5, "x"]}'],
    ['{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": -4, "function": {"name": [1], "arguments": {"a": 1}}}]}}]}',
     '{"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": "ten"}}'],
    ["[" * 3000],
]


def _violate(schema: dict, args: Any) -> dict:
    """Arguments that break ``schema``: drop the required keys, or give the first property a wrong type."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = {}
    args = dict(args) if isinstance(args, dict) else {}
    required = schema.get("required") or []
    if required:
        for k in required:
            args.pop(k, None)
        return args
    props = schema.get("properties") or {}
    if props:
        name, sub = next(iter(props.items()))
        args[name] = 12345 if sub.get("type") == "string" else "not-the-right-type"
        return args
    return {"__unexpected__": [1, 2, 3]} if schema.get("additionalProperties") is False else args


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
    def start(self) -> "ScriptedServer":
        self._thread = threading.Thread(target=self._run, name="scripted-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("scripted server did not start")
        return self

    def stop(self) -> None:
        if self._loop and self._server:
            async def _close() -> None:
                self._server.close()
                for w in list(self._writers):
                    w.transport.abort()
                await self._server.wait_closed()
            asyncio.run_coroutine_threadsafe(_close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._server = None
        if self._thread:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> "ScriptedServer":
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
            await self._send(writer, 401, json.dumps({"error": {"message": msg, "type": "invalid_request_error",
                                                                "param": None, "code": "invalid_api_key"}}).encode(), {})
            return True
        if method == "GET" and path.rstrip("/") == "/v1/models":
            data = {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "scripted"} for m in self.models]}
            await self._send(writer, 200, json.dumps(data).encode(), {})
            return True
        if method != "POST":
            await self._send(writer, 404, b'{"error":{"message":"not found","type":"not_found"}}', {})
            return True
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            await self._send(writer, 400, b'{"error":{"message":"body is not JSON","type":"invalid_request_error"}}', {})
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
    srv.keep_log = False
    srv.start()
    print(f"PORT {srv.port}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        srv.stop()


if __name__ == "__main__":
    main()
