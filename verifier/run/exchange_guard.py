"""Per-exchange guard: whatever one request does, it ends as a classified record, never as a dead suite.

The client already turns HTTP and transport failures into an :class:`~verifier.records.Exchange`; this guard
catches what is left (an exception out of a parser or a serialiser on a body nobody foresaw), so one hostile
reply cannot end a suite that runs thousands of exchanges under ``asyncio.gather`` and lose the records already
answered. The exception becomes ``error_class="harness_error"`` with a one-line message: it is counted as an
error at the endpoint (never as a model decision) and the run goes on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable
from typing import Any

from verifier.records import NOT_SENT, Exchange

HARNESS_ERROR = "harness_error"

#: error classes that say the provider (or the bytes it sent) failed, not that a feature is missing: a probe that
#: meets one is an error to retry and report, never "unsupported"
PROVIDER_FAULTS = frozenset({"rate_limited", "server_error", "timeout", "connection", "broken_stream",
                             "provider_error", "transport_error", "unsupported_encoding", "malformed_response",
                             HARNESS_ERROR, NOT_SENT})  # NOT_SENT: its endpoint was stopped; says nothing of features


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``TypeName: first line of the message``, cut to ``limit`` characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:limit] if text else type(exc).__name__


def _hash(body: Any) -> str:
    try:
        raw = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode()
    except (TypeError, ValueError, RecursionError):
        raw = repr(body).encode("utf-8", "backslashreplace")
    return hashlib.sha256(raw).hexdigest()


def failed_exchange(exc: BaseException, body: Any, *, stream: bool = False) -> Exchange:
    """The record of a request whose handling raised ``exc``: no response kept, error classified."""
    return Exchange(request_hash=_hash(body), stream=bool(stream), error_class=HARNESS_ERROR,
                    error_message=one_line(exc), wire_issues=["harness_exception"])


async def guarded(call: Awaitable[Exchange], body: Any, *, stream: bool = False) -> Exchange:
    """Await one client call; any ``Exception`` (not cancellation) becomes a :func:`failed_exchange`."""
    try:
        return await call
    except Exception as exc:  # noqa: BLE001 - the point: one exchange's failure is a record, not a crash
        return failed_exchange(exc, body, stream=stream)
