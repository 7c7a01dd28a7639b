"""The OpenAI wire format as the server writes and reads it: error bodies (``error_response``, ``ApiError``), SSE
events, streamed tool-call deltas, finish reasons, stop strings, and the request body read under a size cap and
raced against the client going away (``read_body``, ``until_disconnect``).

Why a module of its own: ``server`` turns requests into engine work and replies; what those replies look like on
the wire is a separate concern that the conformance tests check byte by byte."""

from __future__ import annotations

import asyncio
import json

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from reference_engine.engine import (
    ErrorEvent,
)
from reference_engine.tool_parser import ParsedToolCall

#: characters per tool-call argument delta in streams (clients must reassemble arguments from several deltas)
ARGUMENT_DELTA_CHARS = 8


def error_response(status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
                   code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": type_, "param": param, "code": code}},
                        status_code=status)


class ApiError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.type, self.param, self.code = status, type_, param, code

    def response(self) -> JSONResponse:
        return error_response(self.status, str(self), self.type, self.param, self.code)


def _error_payload(ev: ErrorEvent) -> dict:
    return {"error": {"message": ev.message, "type": ev.type, "param": None, "code": ev.code}}


def _call_header(name: str) -> str:
    """The start of a forced call's JSON, up to where the model writes the arguments.

    It stops before the space that follows ``"arguments":`` (token healing): byte-level BPE merges that space
    with the opening brace (`` {"`` is one token), so a header ending in a lone space token puts the model
    where its training never was, and it writes poor arguments after it.
    """
    return f'{{"name": "{name}", "arguments":'


def _finish_reason(calls: list[ParsedToolCall], engine_reason: str) -> str:
    """"tool_calls" when the reply holds calls, except a forced call cut by max_tokens ("length", as OpenAI)."""
    if any(not c.complete for c in calls):
        return engine_reason
    return "tool_calls" if calls else engine_reason


def _call_deltas(index: int, call: ParsedToolCall) -> list[dict]:
    """One tool call as stream deltas, the way vLLM and SGLang send them: id, type and name first with empty
    arguments, then the arguments in several pieces that the client concatenates.

    The call is sent once its block is complete and parsed (so a streamed reply equals the non-streamed one: a
    block whose JSON does not parse stays text in both), then in pieces, so clients' reassembly is exercised."""
    out = [{"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}]
    args = call.arguments
    for i in range(0, len(args), ARGUMENT_DELTA_CHARS):
        out.append({"index": index, "function": {"arguments": args[i: i + ARGUMENT_DELTA_CHARS]}})
    return out


def _find_stop(text: str, stop: list[str]) -> int | None:
    hits = [i for i in (text.find(s) for s in stop) if i >= 0]
    return min(hits) if hits else None


def _sse(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


class BodyTooLarge(Exception):
    """A request body past the server's cap: answered 413 by create_app's handler."""


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) past `limit` bytes: at once from Content-Length, else while it arrives, so a
    huge body is never held in memory whole."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


async def until_disconnect(request: Request, work) -> Response:
    """Run a handler, cancelling it if the client goes away first.

    Starlette does not cancel a plain handler when its client disconnects, so a non-streamed generation would run to
    its end for nobody; the handlers abort their engine request on cancellation (streams abort on their own)."""
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:               # the server itself is stopping
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return Response(status_code=499)          # nobody reads it: the client is gone
    return task.result()
