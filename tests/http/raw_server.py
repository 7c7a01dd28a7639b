"""A loopback HTTP/1.1 server for tests that writes exactly the bytes a test hands it, bad ones included.

A test server may parse HTTP by hand (the client may not): this one reads each request's head and its
Content-Length body, records the raw bytes, and lets the test's ``reply`` coroutine write anything back
(interim 1xx responses, a negative Content-Length, a 1 MB chunk-size line, SSE pings, nothing at all).
It runs in the test's own event loop, and counts connections so tests can check the pool's limits.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


@dataclass
class RawRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    connection: int  # which accepted connection carried it (0-based)

    def json(self) -> dict:
        return json.loads(self.body)


Reply = Callable[[RawRequest, asyncio.StreamWriter], Awaitable[bool | None]]  # return False to close


@dataclass
class RawServer:
    reply: Reply
    read_requests: bool = True  # False: accept, then never read a byte (a server that does not take the body)
    requests: list[RawRequest] = field(default_factory=list)
    connections: int = 0
    open_now: int = 0
    max_open: int = 0
    _server: asyncio.AbstractServer | None = None
    _tasks: set[asyncio.Task] = field(default_factory=set)

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, limit=4 * 1024 * 1024)
        if not self.read_requests:  # a fixed small receive window (no autotuning), inherited by accepted sockets
            self._server.sockets[0].setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = self.connections
        self.connections += 1
        self.open_now += 1
        self.max_open = max(self.max_open, self.open_now)
        try:
            if not self.read_requests:  # take nothing off the socket: the client's writes must stall
                transport = writer.transport
                assert isinstance(transport, asyncio.ReadTransport)
                transport.pause_reading()
                await asyncio.sleep(3600)
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head[:-4].decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                req = RawRequest(method, path, headers, body, conn)
                self.requests.append(req)
                keep = await self.reply(req, writer)
                await writer.drain()
                if keep is False:
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            self.open_now -= 1
            self._tasks.discard(task)
            writer.close()


def http_response(status: int, body: bytes, content_type: str = "application/json", *, reason: str = "OK",
                  extra: str = "") -> bytes:
    """One well-formed response with a Content-Length."""
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"{extra}\r\n").encode() + body


def completion(content: str, *, tool_args: str | None = None) -> bytes:
    """A minimal OpenAI chat completion (a tool call when ``tool_args`` is given)."""
    msg: dict = {"role": "assistant", "content": content}
    finish = "stop"
    if tool_args is not None:
        msg["tool_calls"] = [{"id": "call_1", "type": "function",
                              "function": {"name": "get_weather", "arguments": tool_args}}]
        finish = "tool_calls"
    return json.dumps({"id": "x", "object": "chat.completion", "model": "m",
                       "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 2}}).encode()
