"""What a scripted provider says: the :class:`Reply` a responder returns, and the :class:`RequestContext` it sees.

Why a module of its own: responders (:mod:`verifier.testing.responders`, tests' own) build replies and the server
(:mod:`verifier.testing.scripted_server`) writes them to the wire; both import these types, neither the other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Responder = Callable[[dict, "RequestContext"], "Reply"]


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
    server: Any  # the ScriptedServer that received the request (typed loosely: it imports this module)


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
    sse_bytes: bytes | None = None  # stream: the whole SSE body, byte for byte (a BOM, `event:` lines, no [DONE])
    model: str | None = None

    @classmethod
    def text(cls, content: str, **kw: Any) -> Reply:
        return cls(content=content, **kw)

    @classmethod
    def tool_call(cls, name: str, arguments: dict | str, **kw: Any) -> Reply:
        return cls(tool_calls=[{"name": name, "arguments": arguments}], **kw)

    @classmethod
    def error(cls, status: int, message: str = "scripted error", *, retry_after: float | None = None,
              type_: str = "scripted_error") -> Reply:
        headers = {"Retry-After": _fmt_seconds(retry_after)} if retry_after is not None else {}
        return cls(status=status, body={"error": {"message": message, "type": type_, "param": None, "code": status}},
                   headers=headers)


def _fmt_seconds(s: float) -> str:
    return str(int(s)) if float(s).is_integer() else repr(float(s))
