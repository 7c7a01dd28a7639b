"""Request and response bodies held to the attempt's deadlines and the response size cap.

Why apart from the client: these adapt httpx/aiohttp streaming to two guarantees the client promises (a server that
never reads the request times out at the write deadline; a response never grows past the cap), and each is small
enough to read on its own.
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator

import httpx


class ResponseTooLarge(Exception):
    """The response body passed ``max_response_bytes`` (counted after decompression)."""


class TimedBody:
    """The request body as an async iterable, so the attempt's deadline can be the write deadline while it is sent.

    aiohttp has no write timeout; it pulls the body from this iterator in its writer task and asks for the
    next item only once the previous one is handed to the socket (draining when the buffer is full). So the
    deadline of the attempt is moved to ``now + write_timeout`` when the first byte is pulled and back to the
    total deadline when the write is done: a server that never reads the request ends the attempt in
    ``write_timeout`` seconds, classified ``timeout``.
    """

    def __init__(self, payload: bytes, scope: asyncio.Timeout, deadline: float, write_s: float) -> None:
        self.payload = payload
        self._scope = scope
        self._deadline = deadline
        self._write_s = write_s
        self.writing = False
        self.write_deadline = deadline
        self.finished = False  # set by the attempt when it leaves its deadline scope

    def _move(self, when: float) -> None:
        if not self.finished and not self._scope.expired():
            self._scope.reschedule(when)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self.writing = True
        self.write_deadline = asyncio.get_running_loop().time() + self._write_s
        self._move(min(self._deadline, self.write_deadline))
        yield self.payload
        self.writing = False
        self._move(self._deadline)


class CappedText:
    """Stands in for the response in ``httpx_sse.EventSource``: decoded text, counted against the size cap."""

    def __init__(self, response: httpx.Response, limit: int) -> None:
        self._response = response
        self._limit = limit
        self.headers = response.headers

    async def aiter_text(self) -> AsyncIterator[str]:
        # SSE is UTF-8 by definition, and its parser skips one leading BOM (the spec's "utf-8 decode"): utf-8-sig
        # drops it even when split across reads; left in, it hid the first event's field name and lost the event
        decoder = codecs.getincrementaldecoder("utf-8-sig")("replace")
        seen = 0
        async for chunk in self._response.aiter_bytes():  # decompressed bytes
            seen += len(chunk)
            if seen > self._limit:
                raise ResponseTooLarge(f"stream passed the {self._limit}-byte response cap")
            text = decoder.decode(chunk)
            if text:
                yield text
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail
