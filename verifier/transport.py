"""A lean HTTP/1.1 keep-alive transport for ``httpx.AsyncClient`` (the client's fast path).

Why: httpcore's connection pool scans every connection (with a ``poll`` syscall each) on every request, so
at concurrency 64 the pool alone costs several ms of CPU per request, more than the request itself. This
transport keeps a LIFO list of idle asyncio stream connections per origin, writes each request with one
``send``, and parses status line, headers, Content-Length and chunked bodies directly. Bodies are streamed
(SSE works chunk by chunk). Everything above it (``httpx.AsyncClient``: headers, timeouts config, response
decoding, ``aiter_*``) is unchanged, and failures are raised as the httpx exceptions the client classifies.

Not handled here: HTTP proxies and HTTP/2. :func:`make_transport` falls back to httpx's own transport when a
proxy is configured in the environment.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections import defaultdict
from typing import AsyncIterator

import httpx

_MAX_HEADER = 64 * 1024


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 - closing a dead socket
            pass

    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing() and not self.reader._buffer  # type: ignore[attr-defined]


class _Body(httpx.AsyncByteStream):
    """Response body: yields bytes as they arrive; returns the connection to the pool only when fully read."""

    def __init__(self, transport: "FastTransport", key: tuple, conn: _Conn, length: int | None, chunked: bool,
                 keep_alive: bool, read_timeout: float | None) -> None:
        self._t = transport
        self._key = key
        self._conn = conn
        self._length = length
        self._chunked = chunked
        self._keep = keep_alive
        self._timeout = read_timeout
        self._done = False

    async def _read(self, coro):  # type: ignore[no-untyped-def]
        try:
            if self._timeout is None:
                return await coro
            async with asyncio.timeout(self._timeout):
                return await coro
        except TimeoutError:
            raise httpx.ReadTimeout("read timed out") from None
        except asyncio.IncompleteReadError:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body") from None
        except (ConnectionError, OSError) as e:
            raise httpx.ReadError(str(e) or type(e).__name__) from None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        r = self._conn.reader
        if self._chunked:
            while True:
                line = await self._read(r.readuntil(b"\r\n"))
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise httpx.RemoteProtocolError("malformed chunk size") from None
                if size == 0:
                    while (await self._read(r.readuntil(b"\r\n"))) != b"\r\n":  # trailers
                        pass
                    break
                data = await self._read(r.readexactly(size + 2))
                yield data[:-2]
        elif self._length is not None:
            if self._length:
                yield await self._read(r.readexactly(self._length))
        else:  # delimited by close
            self._keep = False
            while True:
                data = await self._read(r.read(65536))
                if not data:
                    break
                yield data
        self._done = True

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._done and self._keep and conn.usable():
            self._t._idle[self._key].append(conn)
        else:
            conn.close()


class FastTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio streams with keep-alive; see the module docstring for what it leaves out."""

    def __init__(self, *, verify: bool | ssl.SSLContext = True) -> None:
        self._idle: dict[tuple, list[_Conn]] = defaultdict(list)
        if isinstance(verify, ssl.SSLContext):
            self._ssl: ssl.SSLContext | None = verify
        else:
            self._ssl = httpx.create_ssl_context(verify=verify) if hasattr(httpx, "create_ssl_context") else \
                ssl.create_default_context()
        self._closed = False

    async def _connect(self, scheme: str, host: str, port: int, timeout: float | None) -> _Conn:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=self._ssl if scheme == "https" else None,
                    server_hostname=host if scheme == "https" else None, limit=_MAX_HEADER * 16)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"timed out connecting to {host}:{port}") from None
        except (OSError, ssl.SSLError) as e:
            raise httpx.ConnectError(f"{type(e).__name__}: {e.strerror or e}" if isinstance(e, OSError) else str(e)) \
                from None
        return _Conn(reader, writer)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.scheme
        host = url.host
        port = url.port or (443 if scheme == "https" else 80)
        key = (scheme, host, port)
        timeouts = request.extensions.get("timeout", {})
        body = request.content if isinstance(request.stream, httpx.ByteStream) else await request.aread()
        target = url.raw_path.decode("ascii")
        lines = [f"{request.method} {target} HTTP/1.1"]
        have_len = False
        for k, v in request.headers.raw:
            lk = k.lower()
            if lk == b"content-length":
                have_len = True
            if lk == b"transfer-encoding":
                continue
            lines.append(f"{k.decode('latin-1')}: {v.decode('latin-1')}")
        if not have_len and (body or request.method in ("POST", "PUT", "PATCH")):
            lines.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        idle = self._idle[key]
        for reused in (True, False):
            conn = None
            while reused and idle:
                c = idle.pop()
                if c.usable():
                    conn = c
                    break
                c.close()
            if conn is None:
                if not reused:
                    conn = await self._connect(scheme, host, port, timeouts.get("connect"))
                else:
                    continue
            try:
                return await self._exchange(conn, key, head + body, timeouts)
            except _StaleConnection:
                conn.close()
                continue  # a reused keep-alive socket the server had closed: retry once on a fresh one
            except BaseException:
                conn.close()
                raise
        raise httpx.RemoteProtocolError("server closed the connection before responding")

    async def _exchange(self, conn: _Conn, key: tuple, payload: bytes, timeouts: dict) -> httpx.Response:
        read_t = timeouts.get("read")
        try:
            conn.writer.write(payload)
            if conn.writer.transport.get_write_buffer_size() > 0:
                await conn.writer.drain()
        except (ConnectionError, OSError):
            raise _StaleConnection() from None
        try:
            if read_t is None:
                head = await conn.reader.readuntil(b"\r\n\r\n")
            else:
                async with asyncio.timeout(read_t):
                    head = await conn.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if not e.partial:
                raise _StaleConnection() from None
            raise httpx.RemoteProtocolError("incomplete response head") from None
        except TimeoutError:
            raise httpx.ReadTimeout("timed out waiting for the response") from None
        except asyncio.LimitOverrunError:
            raise httpx.RemoteProtocolError("response head too large") from None
        except (ConnectionError, OSError):
            raise _StaleConnection() from None
        lines = head[:-4].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        try:
            status = int(parts[1])
        except (IndexError, ValueError):
            raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:80]!r}") from None
        headers = []
        length = None
        chunked = False
        keep = parts[0] == b"HTTP/1.1"
        for ln in lines[1:]:
            k, sep, v = ln.partition(b":")
            if not sep:
                continue
            k, v = k.strip(), v.strip()
            lk = k.lower()
            if lk == b"content-length":
                try:
                    length = int(v)
                except ValueError:
                    raise httpx.RemoteProtocolError("malformed Content-Length") from None
            elif lk == b"transfer-encoding":
                chunked = b"chunked" in v.lower()
            elif lk == b"connection":
                lv = v.lower()
                keep = (keep and lv != b"close") or lv == b"keep-alive"
            headers.append((k, v))
        if status in (204, 304) or 100 <= status < 200:
            length = 0
        stream = _Body(self, key, conn, None if chunked else length, chunked, keep, read_t)
        return httpx.Response(status, headers=headers, stream=stream, extensions={"http_version": b"HTTP/1.1"})

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for c in conns:
                c.close()
        self._idle.clear()


class _StaleConnection(Exception):
    """Internal: the connection died before any response byte (safe to retry once on a new one)."""


def make_transport(base_url: str) -> httpx.AsyncBaseTransport | None:
    """The fast transport unless a proxy is configured for this URL (then None: httpx's default transport)."""
    if os.environ.get("VERIFIER_HTTP_TRANSPORT", "").lower() == "httpx":
        return None
    proxies = {k.lower(): v for k, v in os.environ.items() if k.lower() in ("http_proxy", "https_proxy", "all_proxy")}
    if proxies:
        host = httpx.URL(base_url).host
        no_proxy = os.environ.get("NO_PROXY") or os.environ.get("no_proxy") or ""
        if host not in ("127.0.0.1", "localhost", "::1") and host not in [h.strip() for h in no_proxy.split(",")]:
            return None
    return FastTransport()
