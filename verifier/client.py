"""One endpoint's HTTP client: retries, rate limit, concurrency cap, SSE reassembly, usage normalisation.

Everything that moves bytes to an OpenAI-compatible endpoint goes through :class:`EndpointClient`, so every
suite kind gets the same retry policy, the same timing and the same wire-conformance checks. The client
returns an :class:`~verifier.records.Exchange` for every logical request, never raises for HTTP/transport
failures (the failure is the measurement), and keeps the API key in exactly one place: the Authorization
header of the shared ``httpx.AsyncClient``. Any text that could echo it (error bodies, exception messages)
is passed through :meth:`EndpointClient._redact` before it reaches a record.

CPU per request matters (thousands of requests at concurrency 64 on a laptop): records are built with
plain dicts validated once by pydantic-core at the end (measured faster than ``model_construct``), bodies are
serialised once, and one keep-alive ``httpx.AsyncClient`` is reused for every request.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import http.cookiejar
import json
import os
import random
import time
from fractions import Fraction
from typing import Any

import httpx
from asyncio_throttle import Throttler
from httpx_sse import EventSource

from pydantic import ValidationError

from verifier.records import EndpointConfig, Exchange
from verifier.response_parse import (  # noqa: F401  (normalize_usage: re-exported for callers of the client)
    _BrokenStream,
    _exchange_defaults,
    _from_completion,
    _StreamAccumulator,
    _usage_dict,
    normalize_usage,
)
from verifier.transport import make_transport

RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})
_MAX_RETRY_AFTER_S = 120.0


class EndpointError(Exception):
    """A preflight failure: one clear line that names the endpoint. ``kind``: unreachable / auth / unknown_model / ..."""

    def __init__(self, endpoint: str, kind: str, message: str) -> None:
        super().__init__(f"endpoint '{endpoint}': {message}")
        self.endpoint = endpoint
        self.kind = kind


def canonical_json(body: Any) -> bytes:
    """Deterministic JSON bytes (sorted keys, no spaces): the basis of request hashes."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def request_hash(body: dict) -> str:
    return hashlib.sha256(canonical_json(body)).hexdigest()


def _parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date), capped so a hostile header cannot stall a run."""
    if not value:
        return None
    try:
        secs = float(value)
    except ValueError:
        try:
            dt = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        secs = dt.timestamp() - time.time()
    return max(0.0, min(secs, _MAX_RETRY_AFTER_S))


def _throttler(rate: float | None) -> Throttler | None:
    """asyncio-throttle takes (count, period); express a float req/s rate as an exact small fraction."""
    if not rate or rate <= 0:
        return None
    frac = Fraction(rate).limit_denominator(1000)
    return Throttler(rate_limit=max(1, frac.numerator), period=float(frac.denominator))


class EndpointClient:
    """Async client for one endpoint; use as ``async with EndpointClient(cfg) as c: ex = await c.chat(body)``.

    ``api_key``: when None, read from the env var named by ``config.api_key_env`` (if any).
    ``fast_transport``: use :class:`verifier.transport.FastTransport` under httpx (default; httpx's own transport
    when False or when a proxy is configured).
    ``backoff_base``/``backoff_cap``: exponential backoff with full jitter, ``uniform(0, min(cap, base * 2**n))``;
    a Retry-After header sets a floor under that sleep.
    """

    def __init__(self, config: EndpointConfig, *, api_key: str | None = None, backoff_base: float = 0.5,
                 backoff_cap: float = 30.0, rng: random.Random | None = None, fast_transport: bool = True) -> None:
        self.config = config
        self._fast = fast_transport
        if api_key is None and config.api_key_env:
            api_key = os.environ.get(config.api_key_env) or None
        self._secrets = [s for s in (api_key,) if s] + [v for k, v in config.headers.items() if _sensitive(k) and v]
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers.update(config.headers)
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._http: httpx.AsyncClient | None = None
        self._sem = asyncio.Semaphore(max(1, config.concurrency))
        self._throttle = _throttler(config.rate)
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._rng = rng or random.Random()
        self._base = config.base_url.rstrip("/")
        self._extra = dict(config.extra_body)
        self._urls: dict[str, httpx.URL] = {}

    # lifecycle -------------------------------------------------------------------------------------------
    async def __aenter__(self) -> "EndpointClient":
        self._open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _open(self) -> httpx.AsyncClient:
        if self._http is None:
            n = max(1, self.config.concurrency)
            self._http = httpx.AsyncClient(
                headers=self._headers,
                timeout=httpx.Timeout(self.config.timeout, connect=min(10.0, self.config.timeout)),
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
                follow_redirects=False,
                transport=make_transport(self.config.base_url) if self._fast else None,
                cookies=_NoCookies(),
            )
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _redact(self, text: str | None) -> str | None:
        if text is None:
            return None
        for s in self._secrets:
            if s in text:
                text = text.replace(s, "***")
        return text

    # public API --------------------------------------------------------------------------------------------
    async def list_models(self) -> list[str]:
        """Model ids from ``GET /models``; raises :class:`EndpointError` (one line) on any failure."""
        name = self.config.name
        try:
            r = await self._open().get(self._base + "/models")
        except httpx.TimeoutException:
            raise EndpointError(name, "unreachable", f"timed out connecting to {self.config.base_url}") from None
        except httpx.HTTPError as e:
            raise EndpointError(name, "unreachable",
                                f"cannot reach {self.config.base_url} ({type(e).__name__})") from None
        if r.status_code == 401 or r.status_code == 403:
            raise EndpointError(name, "auth", f"authentication failed (HTTP {r.status_code}); check "
                                + (f"${self.config.api_key_env}" if self.config.api_key_env else "the API key"))
        if r.status_code != 200:
            raise EndpointError(name, "models_unavailable", f"GET /models returned HTTP {r.status_code}")
        try:
            data = r.json()
            return [str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and "id" in m]
        except (ValueError, AttributeError, TypeError):
            raise EndpointError(name, "bad_response", "GET /models did not return an OpenAI model list") from None

    async def preflight(self) -> None:
        """Fail early with one clear line: unreachable, bad key (401), unknown model. Fills ``config.model``."""
        name = self.config.name
        try:
            models = await self.list_models()
        except EndpointError as e:
            if e.kind != "models_unavailable":
                raise
            if not self.config.model:
                raise EndpointError(name, "unknown_model", "GET /models is unavailable; pass --model") from None
            ex = await self.chat({"messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}, stream=False)
            if ex.error_class == "auth":
                raise EndpointError(name, "auth", "authentication failed (HTTP 401)") from None
            if ex.error_class == "not_found":
                raise EndpointError(name, "unknown_model", f"model '{self.config.model}' not found (HTTP 404)") from None
            if not ex.ok:
                raise EndpointError(name, "unreachable", f"test request failed: {ex.error_class} "
                                    f"(HTTP {ex.status})") from None
            return
        if not self.config.model:
            if not models:
                raise EndpointError(name, "unknown_model", "GET /models lists no models; pass --model")
            self.config.model = models[0]
        elif models and self.config.model not in models:
            shown = ", ".join(models[:5]) + (", ..." if len(models) > 5 else "")
            raise EndpointError(name, "unknown_model", f"model '{self.config.model}' is not served (available: {shown})")

    async def chat(self, body: dict, *, stream: bool | None = None) -> Exchange:
        """POST /chat/completions with retries; streamed when ``stream`` (default: the endpoint's setting)."""
        stream = self.config.stream if stream is None else stream
        full = self._full_body(body, stream)
        if stream:
            full["stream_options"] = {**(full.get("stream_options") or {}), "include_usage": True}
        return await self._request("/chat/completions", full, stream, chat=True)

    async def completions(self, body: dict) -> Exchange:
        """POST /completions (legacy, non-streamed): used for prompt logprobs with ``echo``."""
        return await self._request("/completions", self._full_body(body, False), False, chat=False)

    async def post_json(self, path: str, body: dict) -> tuple[int, dict | None, Exchange]:
        """Any other JSON POST (e.g. ``/x/distributions``) with the same retries; body passed as given."""
        ex = await self._request("/" + path.lstrip("/"), dict(body), False, chat=False)
        data = ex.response if isinstance(ex.response, dict) else None
        return (ex.status or 0), data, ex

    # internals -----------------------------------------------------------------------------------------------
    def _full_body(self, body: dict, stream: bool) -> dict:
        full = dict(body)
        if self.config.model and "model" not in full:
            full["model"] = self.config.model
        full["stream"] = stream
        if self._extra:
            full.update(self._extra)
        return full

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        jitter = self._rng.uniform(0, min(self.backoff_cap, self.backoff_base * (2 ** (attempt - 1))))
        return max(jitter, retry_after) if retry_after is not None else jitter

    async def _request(self, path: str, body: dict, stream: bool, *, chat: bool) -> Exchange:
        payload = canonical_json(body)
        rhash = hashlib.sha256(payload).hexdigest()
        http = self._open()
        url = self._urls.get(path)
        if url is None:  # parse each endpoint URL once: httpx re-parses strings on every request
            url = self._urls[path] = httpx.URL(self._base + path)
        retried: list[int] = []
        attempts = 0
        max_attempts = max(1, self.config.max_attempts)
        while True:
            attempts += 1
            if self._throttle is not None:
                async with self._throttle:
                    pass
            async with self._sem:
                t0 = time.perf_counter()
                try:
                    if stream:
                        ex = await self._stream_once(http, url, payload, t0)
                    else:
                        ex = await self._plain_once(http, url, payload, t0, chat)
                    retry_after = ex.pop("_retry_after", None)
                except httpx.TimeoutException as e:
                    ex = {"status": None, "error_class": "timeout", "error_message": f"{type(e).__name__}"}
                    retry_after = None
                except (httpx.ConnectError, httpx.NetworkError, httpx.RemoteProtocolError) as e:
                    cls = "broken_stream" if stream and isinstance(e, (httpx.RemoteProtocolError, httpx.ReadError)) \
                        else "connection"
                    ex = {"status": None, "error_class": cls, "error_message": self._redact(f"{type(e).__name__}: {e}")}
                    retry_after = None
                except _BrokenStream as e:
                    ex = {"status": 200, "error_class": "broken_stream", "error_message": self._redact(str(e))}
                    retry_after = None
                except httpx.HTTPError as e:  # decoding / protocol oddities: recorded, not retried
                    ex = {"status": None, "error_class": "transport_error",
                          "error_message": self._redact(f"{type(e).__name__}: {e}")}
                    retry_after = None
                ex["latency_s"] = time.perf_counter() - t0
            err = ex.get("error_class")
            retryable = err in ("rate_limited", "server_error", "timeout", "connection", "broken_stream")
            if not retryable or attempts >= max_attempts:
                break
            # the HTTP status that caused the retry; 0 for transport failures (timeout, connection, broken stream)
            retried.append((ex.get("status") or 0) if err in ("rate_limited", "server_error") else 0)
            await asyncio.sleep(self._backoff(attempts, retry_after))
        ex.setdefault("wire_issues", [])
        fields = {"request_hash": rhash, "attempts": attempts, "retried_statuses": retried, "stream": stream,
                  **_exchange_defaults(ex)}
        try:
            return Exchange.model_validate(fields)
        except ValidationError as e:  # a shape our extraction did not foresee: keep the body, flag it, never crash
            fields.update(content=None, reasoning_content=None, tool_calls=[], logprobs=None, usage=_usage_dict(None),
                          finish_reason=None, error_class="malformed_response",
                          error_message=f"unexpected response shape: {e.errors()[0]['loc']}",
                          wire_issues=[*fields["wire_issues"], "unexpected_response_shape"])
            fields["response"] = fields["response"] if isinstance(fields["response"], dict) else None
            return Exchange.model_validate(fields)

    def _classify(self, status: int, text: str) -> dict:
        if status == 429:
            cls = "rate_limited"
        elif status >= 500 or status in RETRYABLE_STATUSES:
            cls = "server_error"
        elif status in (401, 403):
            cls = "auth"
        elif status == 404:
            cls = "not_found"
        else:
            cls = "client_error"
        msg = text
        try:
            err = json.loads(text).get("error")
            if isinstance(err, dict) and err.get("message"):
                msg = str(err["message"])
            elif isinstance(err, str):
                msg = err
        except (ValueError, AttributeError):
            pass
        return {"status": status, "error_class": cls, "error_message": self._redact(msg[:500])}

    async def _plain_once(self, http: httpx.AsyncClient, url: httpx.URL, payload: bytes, t0: float, chat: bool) -> dict:
        r = await http.post(url, content=payload)
        raw = await r.aread()
        if r.status_code >= 300:
            out = self._classify(r.status_code, raw.decode("utf-8", "replace"))
            out["_retry_after"] = _parse_retry_after(r.headers.get("retry-after"))
            return out
        try:
            data = json.loads(raw)
        except ValueError:
            return {"status": r.status_code, "error_class": "malformed_response",
                    "error_message": "response body is not JSON", "wire_issues": ["malformed_response_body"]}
        if not chat:
            return {"status": r.status_code, "response": data}
        return _from_completion(r.status_code, data)

    async def _stream_once(self, http: httpx.AsyncClient, url: httpx.URL, payload: bytes, t0: float) -> dict:
        async with http.stream("POST", url, content=payload, headers={"accept": "text/event-stream"}) as r:
            if r.status_code >= 300:
                raw = await r.aread()
                out = self._classify(r.status_code, raw.decode("utf-8", "replace"))
                out["_retry_after"] = _parse_retry_after(r.headers.get("retry-after"))
                return out
            acc = _StreamAccumulator()
            async for sse in EventSource(r).aiter_sse():
                if acc.feed(sse.data, time.perf_counter() - t0):
                    break
            if not acc.done:
                raise _BrokenStream(f"stream ended after {acc.events} events without [DONE]")
            return acc.result(r.status_code)


class _NoCookies(http.cookiejar.CookieJar):
    """API calls carry no session state; parsing Set-Cookie on every response cost ~10% of client CPU."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


def _sensitive(header: str) -> bool:
    h = header.lower()
    return any(s in h for s in ("auth", "key", "token", "secret", "cookie", "password"))
