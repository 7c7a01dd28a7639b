"""The HTTP stack under :class:`verifier.http.client.EndpointClient`: httpx on aiohttp, with honest error types.

Why this stack: httpx gives the API (timeouts, limits, decoding, streaming) and aiohttp's C parser (llhttp)
and connection pool give the speed (issue #32 measured httpx + ``httpx-aiohttp`` within 6 % of a hand-written
transport and about 2.3x faster than httpx's own pool on 2,000 requests at concurrency 64). No HTTP is parsed
here: this module only builds the client and translates aiohttp's exceptions.

Why the translation: ``httpx-aiohttp`` 0.2 maps every ``aiohttp.ClientConnectionError`` (a server that
disconnects, a reset socket) to ``httpx.ConnectTimeout``, so a dropped connection would be recorded as a
timeout, and it lets ``aiohttp.ClientResponseError`` (a malformed response: negative Content-Length, a 1 MB
chunk-size line, a bad status line) escape as a non-httpx exception. :class:`LibraryTransport` re-raises each
as the httpx exception that says what happened; :class:`MalformedHTTP` marks a response llhttp refused.

What the pool honours: ``httpx.Limits.max_connections`` (aiohttp's connector limit) and ``keepalive_expiry``;
``Timeout.pool`` bounds waiting for a pooled connection plus connecting (aiohttp's ``connect``),
``Timeout.connect`` the TCP/TLS connect, ``Timeout.read`` each socket read. aiohttp has no write timeout: the
client bounds the write itself (see ``EndpointClient``). aiohttp never re-sends a POST on its own (it retries
only idempotent methods on a stale keep-alive socket).

The one re-send this stack makes (:meth:`LibraryTransport.handle_async_request`) is for the stale keep-alive
race of RFC 9112 section 9.3.1: a server closes a connection it thinks idle while the next request is already on
its way, so its socket is gone before the request could be read. A request is re-sent at once, and the client
does not count it as an attempt, only when all of these hold, each observed on the wire, not guessed:

1. the connection had already carried an earlier request (it came from the pool; a fresh connection that fails
   is always a counted attempt);
2. it ended by the server's doing (``ServerDisconnectedError``: EOF; ``ClientOSError``: reset, or the request
   could not be written) -- never a timeout, a cut body or a malformed response;
3. not one byte arrived on it after the request took it (counted by :class:`_CountingHandler`): the server did
   not begin an answer.

The re-send goes out on a **new** connection: idle pooled connections it would have taken are closed instead
(:class:`_WatchedConnector`). Why: a server that closes idle connections closes all that sat idle as long, so the
next pooled one is as likely stale; re-sending on it could meet the race again (with 4 pooled connections a case was
lost about once in 60 runs of the test below). A new connection that fails is a counted attempt (rule 1).

What the rule cannot see: a server that reads a request and then closes the connection without writing a byte
looks the same on the wire. That is why the free re-sends are bounded (:data:`UNDELIVERED_RESENDS` per
attempt; after them the failure is the attempt's) and every one is recorded in the exchange
(``resent_undelivered``). httpx's own transport (used behind a proxy) makes no such re-send.

When an HTTP proxy is configured in the environment for the endpoint's host (loopback hosts excepted),
httpx's own transport is used (it reads the proxy variables; the aiohttp session is built without ``trust_env``).

Why :class:`HttpStack` hands requests straight to the aiohttp transport: ``AsyncClient.send`` wraps each one in
an auth flow, a redirect loop, cookie extraction and a bound response stream, none of which applies to a
request the client builds whole (headers, credentials and timeouts included) and never follows or keeps
cookies from; on 2,000 loopback requests that wrapping was ~40 % of the client's CPU. httpx's types, decoding
and exceptions stay: the transport takes an ``httpx.Request`` and returns an ``httpx.Response``.
"""

from __future__ import annotations

import base64
import contextvars
import functools
import os
import typing
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import httpx
from aiohttp.client_proto import ResponseHandler
from httpx._decoders import SUPPORTED_DECODERS
from httpx_aiohttp import AiohttpTransport

#: free re-sends of one attempt whose reused connection closed before a response byte (see the module docstring);
#: a re-send takes a new connection, whose failure is counted, so one is all the rule can use
UNDELIVERED_RESENDS = 1


@dataclass
class Delivery:
    """What :meth:`HttpStack.send` did to get one request to the server beyond sending it once."""

    resent_undelivered: int = 0  # re-sends of a request a stale keep-alive connection never delivered


#: the request extension under which :meth:`HttpStack.send` hands a :class:`Delivery` to the transport
DELIVERY = "verifier_delivery"


class MalformedHTTP(httpx.RemoteProtocolError):
    """The response broke HTTP/1.1 framing (llhttp refused it): bad Content-Length, chunk size, status line."""


class UnsupportedEncoding(httpx.DecodingError):
    """The response names a ``Content-Encoding`` nothing here can decode; its bytes would be misread as JSON/SSE."""


def unsupported_encodings(headers: httpx.Headers) -> list[str]:
    """The ``Content-Encoding`` values httpx cannot decode (it skips them silently and hands over the raw bytes).

    Decoded: gzip, deflate, identity (httpx), br (the ``brotli`` package), zstd (``zstandard``).
    """
    values = [v.strip().lower() for v in headers.get_list("content-encoding", split_commas=True)]
    return [v for v in values if v and v not in SUPPORTED_DECODERS]


class _CountingHandler(ResponseHandler):
    """aiohttp's protocol, counting the bytes each connection received and the requests it carried."""

    def __init__(self, *args: typing.Any, **kwargs: typing.Any) -> None:
        super().__init__(*args, **kwargs)
        self.bytes_received = 0
        self.requests_carried = 0

    def data_received(self, data: bytes) -> None:
        self.bytes_received += len(data)
        super().data_received(data)


@dataclass
class _WireSeen:
    """Which connection one request took, and what that connection had received when it took it."""

    protocol: _CountingHandler | None = None
    reused: bool = False
    bytes_before: int = 0
    new_connection: bool = False  # a re-send: take a new connection, closing idle pooled ones offered instead

    def undelivered(self, exc: BaseException) -> bool:
        """True when ``exc`` ended the request before the server could have read it (module docstring)."""
        cause = exc.__cause__ if isinstance(exc, httpx.HTTPError) and exc.__cause__ is not None else exc
        ended_by_server = isinstance(cause, (aiohttp.ServerDisconnectedError, _RESET)) or (
            isinstance(cause, aiohttp.ClientOSError) and not isinstance(cause, aiohttp.ClientConnectorError))
        if isinstance(cause, aiohttp.ServerDisconnectedError) and not isinstance(cause.message, str):
            return False  # it carries a partly received response head
        return (ended_by_server and self.reused and self.protocol is not None
                and self.protocol.bytes_received == self.bytes_before)


#: "Cannot write to closing transport": the connection was already closed when the request was to be written
_RESET: tuple[type[BaseException], ...] = tuple(
    c for c in (getattr(aiohttp, "ClientConnectionResetError", None),) if isinstance(c, type))

_WIRE: contextvars.ContextVar[_WireSeen | None] = contextvars.ContextVar("verifier_http_wire", default=None)


class _WatchedConnector(aiohttp.TCPConnector):
    """aiohttp's connector, noting for the request being sent whether its connection is a reused one.

    Why ``_factory``: it is the one place aiohttp builds the connection protocol; without the counting handler
    (a future aiohttp without the attribute) the evidence is missing and no request is ever re-sent free.
    """

    def __init__(self, **kwargs: typing.Any) -> None:
        super().__init__(**kwargs)
        if hasattr(self, "_factory"):
            self._factory = functools.partial(_CountingHandler, loop=self._loop)  # type: ignore[assignment]

    async def connect(self, req: typing.Any, traces: typing.Any, timeout: typing.Any) -> typing.Any:
        conn = await super().connect(req, traces, timeout)
        seen = _WIRE.get()
        if seen is not None and seen.new_connection:
            # bounded: each pass closes a pooled connection, and the pool holds no more than its limit
            for _ in range((self.limit or 100) + 1):
                proto = conn.protocol
                if not (isinstance(proto, _CountingHandler) and proto.requests_carried > 0):
                    break
                conn.close()  # idle as long as the one that just went stale: likely stale too
                conn = await super().connect(req, traces, timeout)
        proto = conn.protocol
        if seen is not None and isinstance(proto, _CountingHandler):
            seen.protocol, seen.reused, seen.bytes_before = proto, proto.requests_carried > 0, proto.bytes_received
        if isinstance(proto, _CountingHandler):
            proto.requests_carried += 1
        return conn


def translate(exc: BaseException) -> BaseException:
    """The httpx exception that says what an aiohttp failure (raw, or wrapped by httpx-aiohttp) really was."""
    cause = exc
    if isinstance(exc, httpx.HTTPError) and isinstance(exc.__cause__, aiohttp.ClientError):
        cause = exc.__cause__
    elif not isinstance(exc, aiohttp.ClientError):
        return exc
    msg = _one_line(cause)
    if isinstance(cause, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(msg or "timed out connecting")
    if isinstance(cause, aiohttp.ServerTimeoutError):
        return httpx.ReadTimeout(msg or "timed out reading")
    if isinstance(cause, aiohttp.ClientConnectorError):
        return httpx.ConnectError(msg)
    if isinstance(cause, aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError("server disconnected")
    if isinstance(cause, aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(f"response body cut short ({msg})")
    if isinstance(cause, aiohttp.ClientResponseError):
        return MalformedHTTP(f"malformed HTTP response: {msg}")
    if isinstance(cause, aiohttp.ClientOSError):
        return httpx.ReadError(msg)
    if isinstance(cause, (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError)):
        return httpx.UnsupportedProtocol(msg)
    if isinstance(cause, aiohttp.ClientConnectionError):
        return httpx.NetworkError(msg)
    return httpx.TransportError(msg)


def _one_line(exc: BaseException) -> str:
    """A short message without aiohttp's request dump (which would quote every request header)."""
    if isinstance(exc, aiohttp.ClientResponseError):
        text = str(exc.message)
    else:
        text = str(exc)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return first[:200]


class _TranslatedStream(httpx.AsyncByteStream):
    """A response body whose aiohttp failures surface as the right httpx exceptions."""

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except (aiohttp.ClientError, httpx.TransportError) as e:
            raise translate(e) from None
        except Exception as e:  # noqa: BLE001 - see LibraryTransport.handle_async_request
            raise httpx.TransportError(f"{type(e).__name__}: {_one_line(e)}") from None

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        except (aiohttp.ClientError, httpx.TransportError) as e:
            raise translate(e) from None
        except Exception as e:  # noqa: BLE001 - see LibraryTransport.handle_async_request
            raise httpx.TransportError(f"{type(e).__name__}: {_one_line(e)}") from None


class LibraryTransport(AiohttpTransport):
    """``httpx_aiohttp.AiohttpTransport`` with truthful exceptions and a cookie-less aiohttp session."""

    def __init__(self, *, limits: httpx.Limits) -> None:
        super().__init__(limits=limits, trust_env=False, client=self._session)

    def _session(self) -> aiohttp.ClientSession:
        connector = _WatchedConnector(limit=self.limits.max_connections or 0,
                                      keepalive_timeout=self.limits.keepalive_expiry or 15.0, ssl=self.ssl_context)
        # API calls carry no session state; parsing Set-Cookie on every response is wasted CPU
        return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.userinfo:
            # httpx already turned URL userinfo into an Authorization header; aiohttp would do it again and
            # refuse the pair (ValueError), so it gets the URL without it
            request.url = request.url.copy_with(username=None, password=None)
        resends = 0
        while True:
            seen = _WireSeen(new_connection=resends > 0)
            token = _WIRE.set(seen)
            try:
                response = await super().handle_async_request(request)
                break
            except (aiohttp.ClientError, httpx.TransportError) as e:
                if not seen.undelivered(e) or resends >= UNDELIVERED_RESENDS:
                    raise translate(e) from None
            except Exception as e:  # noqa: BLE001 - anything else aiohttp raises is still a failed exchange
                raise httpx.TransportError(f"{type(e).__name__}: {_one_line(e)}") from None
            finally:
                _WIRE.reset(token)
            resends += 1  # never read by the server (module docstring): sent again at once, on another connection
            delivery = request.extensions.get(DELIVERY)
            if isinstance(delivery, Delivery):
                delivery.resent_undelivered += 1
        response.stream = _TranslatedStream(typing.cast(httpx.AsyncByteStream, response.stream))
        return response


def proxy_configured(base_url: str) -> bool:
    """True when the environment routes ``base_url`` through an HTTP proxy (httpx's rules: *_proxy, NO_PROXY)."""
    env = {k.lower(): v for k, v in os.environ.items()}
    if not any(env.get(k) for k in ("http_proxy", "https_proxy", "all_proxy")):
        return False
    host = httpx.URL(base_url).host
    if host in ("127.0.0.1", "localhost", "::1"):
        return False  # a loopback endpoint (the built-in engine) is never reached through a proxy
    no_proxy = [h.strip() for h in env.get("no_proxy", "").split(",") if h.strip()]
    if "*" in no_proxy:
        return False
    return not any(host == h.lstrip(".") or host.endswith("." + h.lstrip(".")) for h in no_proxy)


class HttpStack:
    """One endpoint's keep-alive connections: an ``httpx.AsyncClient`` and, when it runs on aiohttp, its transport.

    :meth:`send` gives a fully built request to the aiohttp transport directly (see the module docstring);
    with httpx's own transport (a proxy applies, or ``library_transport=False``) it goes through the client.
    """

    def __init__(self, *, base_url: str, headers: dict[str, str], timeout: httpx.Timeout, limits: httpx.Limits,
                 library_transport: bool = True) -> None:
        use_aiohttp = library_transport and os.environ.get("VERIFIER_HTTP_TRANSPORT", "").lower() != "httpx" \
            and not proxy_configured(base_url)
        self.transport = LibraryTransport(limits=limits) if use_aiohttp else None
        self.client = httpx.AsyncClient(headers=headers, timeout=timeout, limits=limits, follow_redirects=False,
                                        transport=self.transport)

    def request_headers(self, url: httpx.URL) -> list[tuple[str, str]]:
        """The client's default headers, plus the Basic credentials of URL userinfo, which ``AsyncClient.send``
        would add and which a request sent straight to the transport must carry itself."""
        headers = list(self.client.headers.multi_items())
        if self.transport is not None and (url.username or url.password):
            token = base64.b64encode(f"{url.username}:{url.password}".encode()).decode("ascii")
            headers = [(k, v) for k, v in headers if k.lower() != "authorization"]
            headers.append(("authorization", f"Basic {token}"))
        return headers

    async def send(self, request: httpx.Request, delivery: Delivery | None = None) -> httpx.Response:
        """The response, its body not yet read (close it with ``aclose``); never follows a redirect.

        ``delivery`` counts the re-sends of a request the server provably never read (the module docstring).
        """
        if delivery is not None:
            request.extensions[DELIVERY] = delivery
        if self.transport is None:
            return await self.client.send(request, stream=True)
        response = await self.transport.handle_async_request(request)
        response.request = request
        return response

    async def aclose(self) -> None:
        await self.client.aclose()  # closes the transport (and its aiohttp session) too

