"""One endpoint's HTTP client: retries, rate limit, concurrency cap, deadlines, SSE reassembly, redaction.

Everything that moves bytes to an OpenAI-compatible endpoint goes through :class:`EndpointClient`, so every
suite kind gets the same retry policy, the same timing and the same wire-conformance checks. The client
returns an :class:`~verifier.records.Exchange` for every logical request and never raises for HTTP/transport
failures (the failure is the measurement): each attempt ends as a response or as one classified error.

What goes on the wire is the suite line as written: keys keep the order they were written in, at every depth
(chat templates render tool schemas in key order, so sorting would change the prompt). The client only adds
``model``, ``stream``, ``stream_options.include_usage`` and the endpoint's ``extra_body``; the request hash
is still taken over the canonical (sorted) form, so it does not depend on how a file was formatted.

HTTP itself is a library's job (:mod:`verifier.http.stack`: httpx on aiohttp). Each attempt is bounded by
separate connect / write / idle-read deadlines and a total one that ends it even while a stream keeps sending,
and by a cap on the (decompressed) response size. Every string the client returns passes through
:mod:`verifier.http.redaction` before anything could cut it to length, so a provider that echoes the key into
model output or an error body cannot get it into a record.

CPU per request matters (thousands of requests at concurrency 64 on a laptop): records are built with
plain dicts validated once by pydantic-core at the end (measured faster than ``model_construct``), bodies are
serialised once, and one keep-alive ``httpx.AsyncClient`` is reused for every request.
"""

from __future__ import annotations

import asyncio
import hashlib
import http.cookiejar
import json
import logging
import os
import random
import time
from typing import Any

import httpx
from httpx_sse import EventSource
from pydantic import ValidationError

from verifier.http import redaction
from verifier.http.bodies import CappedText, ResponseTooLarge, TimedBody
from verifier.http.failure_text import MESSAGE_LIMIT, exception_line, redirect_line, timeout_line
from verifier.http.pacing import parse_retry_after, throttler
from verifier.http.parse import (
    _BrokenStream,
    _exchange_defaults,
    _from_completion,
    _StreamAccumulator,
    _usage_dict,
)
from verifier.http.record_fields import redact_fields, store_once
from verifier.http.spend import (
    EndpointLedger,
    prompt_token_bound,
    request_max_tokens,
    settled_usd,
    worst_case_usd,
)
from verifier.http.stack import Delivery, HttpStack, MalformedHTTP, UnsupportedEncoding, unsupported_encodings
from verifier.http.stopping import EndpointStop
from verifier.records import BUDGET_REFUSED, NOT_SENT, EndpointConfig, Exchange

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})
#: Error classes the retry policy tries again (up to ``max_attempts``).
RETRYABLE_ERRORS = frozenset({"rate_limited", "server_error", "timeout", "connection", "broken_stream",
                              "protocol_error", "provider_error"})


class EndpointError(Exception):
    """A preflight failure: one clear line that names the endpoint.

    ``kind``: unreachable / auth / unknown_model / ...; ``status``: the HTTP status behind it, when one came.
    """

    def __init__(self, endpoint: str, kind: str, message: str, status: int | None = None) -> None:
        message = redaction.redact_message(message) or ""
        super().__init__(f"endpoint '{endpoint}': {message}")
        self.endpoint = endpoint
        self.kind = kind
        self.status = status


def canonical_json(body: Any) -> bytes:
    """Deterministic JSON bytes (sorted keys, no spaces): the basis of request hashes, never what is sent."""
    return _utf8_json(body, sort_keys=True)


def wire_json(body: Any) -> bytes:
    """The bytes sent: compact JSON with every key in the order it was written (see the module docstring)."""
    return _utf8_json(body, sort_keys=False)


def _utf8_json(body: Any, *, sort_keys: bool) -> bytes:
    try:
        return json.dumps(body, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate cannot be UTF-8: send it as the JSON escape it came from
        return json.dumps(body, sort_keys=sort_keys, separators=(",", ":")).encode()


def request_hash(body: dict) -> str:
    return hashlib.sha256(canonical_json(body)).hexdigest()

class EndpointClient:
    """Async client for one endpoint; use as ``async with EndpointClient(cfg) as c: ex = await c.chat(body)``.

    ``api_key``: when None, read from the env var named by ``config.api_key_env`` (if any). The key, the values
    of secret-looking headers and URL userinfo are registered with :mod:`verifier.http.redaction` here.
    ``library_transport``: httpx on aiohttp (default); httpx's own transport when False or a proxy applies.
    ``backoff_base``/``backoff_cap``: exponential backoff with full jitter, ``uniform(0, min(cap, base * 2**n))``;
    a Retry-After header sets a floor under that sleep.
    ``ledger``: the run's budget for this endpoint (:mod:`verifier.http.spend`): every chat / completions attempt
    reserves its worst case first and is not sent when that would pass a cap.
    """

    def __init__(self, config: EndpointConfig, *, api_key: str | None = None, backoff_base: float = 0.5,
                 backoff_cap: float = 30.0, rng: random.Random | None = None, library_transport: bool = True,
                 ledger: EndpointLedger | None = None) -> None:
        self.config = config
        self.ledger = ledger
        self._library_transport = library_transport
        if api_key is None and config.api_key_env:
            api_key = os.environ.get(config.api_key_env) or None
        redaction.register(api_key)
        redaction.register_headers(config.headers)
        redaction.register_url(config.base_url)
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers.update(config.headers)
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._http: HttpStack | None = None
        self._sem = asyncio.Semaphore(max(1, config.concurrency))
        self._throttle = throttler(config.rate)
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._rng = rng or random.Random()
        self._base = config.base_url.rstrip("/")
        self._extra = dict(config.extra_body)
        self._urls: dict[str, httpx.URL] = {}
        self._request_headers: list[tuple[str, str]] | None = None
        self._timeout_ext: dict[str, float | None] = {}
        self.stop = EndpointStop(config)  # set once every chat request is refused (verifier.http.stopping)

    # lifecycle -------------------------------------------------------------------------------------------
    async def __aenter__(self) -> EndpointClient:
        self._open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _timeouts(self) -> httpx.Timeout:
        c = self.config
        connect = min(c.connect_timeout, c.timeout)
        return httpx.Timeout(connect=connect, read=c.read_timeout, write=min(c.write_timeout, c.timeout), pool=connect)

    def _open(self) -> HttpStack:
        if self._http is None:
            n = max(1, self.config.concurrency)
            self._http = HttpStack(base_url=self.config.base_url, headers=self._headers, timeout=self._timeouts(),
                                   limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
                                   library_transport=self._library_transport)
            self._http.client.cookies.jar = _NoCookies()
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    @property
    def _shown_url(self) -> str:
        return redaction.redact_url(self.config.base_url) or ""

    # public API --------------------------------------------------------------------------------------------
    async def list_models(self) -> list[str]:
        """Model ids from ``GET /models``; raises :class:`EndpointError` (one line) on any failure."""
        name = self.config.name
        try:
            async with asyncio.timeout(self.config.timeout):
                http = self._open().client
                r = await http.send(http.build_request("GET", self._base + "/models"), stream=True)
                try:
                    raw = await self._read_capped(r)
                finally:
                    await r.aclose()
        except (httpx.TimeoutException, TimeoutError):
            raise EndpointError(name, "unreachable", f"timed out connecting to {self._shown_url}") from None
        except httpx.HTTPError as e:
            raise EndpointError(name, "unreachable",
                                f"cannot reach {self._shown_url} ({type(e).__name__}: {e})") from None
        except ResponseTooLarge:
            raise EndpointError(name, "bad_response", "GET /models answered more than max_response_bytes") from None
        if r.status_code == 401 or r.status_code == 403:
            raise EndpointError(name, "auth", f"authentication failed (HTTP {r.status_code}); check "
                                + (f"${self.config.api_key_env}" if self.config.api_key_env else "the API key"))
        if 300 <= r.status_code < 400:
            raise EndpointError(name, "models_unavailable", redirect_line(r))
        if r.status_code != 200:
            raise EndpointError(name, "models_unavailable", f"GET /models returned HTTP {r.status_code}",
                                status=r.status_code)
        try:
            data = json.loads(raw)
            return [str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and "id" in m]
        except (ValueError, AttributeError, TypeError):
            raise EndpointError(name, "bad_response", "GET /models did not return an OpenAI model list") from None

    async def preflight(self) -> None:
        """Fail early with one clear line: unreachable, bad key (401), unknown model. Fills ``config.model``.

        A base URL without its ``/v1`` (``http://host:8000``) is the usual first mistake: when ``GET /models`` or the
        test chat request is HTTP 404 there and ``<base>/v1`` answers, the endpoint uses ``<base>/v1`` and a warning
        line says so.
        """
        name = self.config.name
        try:
            models = await self.list_models()
        except EndpointError as e:
            if e.kind != "models_unavailable":
                raise
            models_v1 = await self._models_under_v1() if e.status == 404 else None
            if models_v1 is None:
                await self._chat_preflight(e)
                return
            models = models_v1
        if not self.config.model:
            if not models:
                raise EndpointError(name, "unknown_model", "GET /models lists no models; pass --model")
            self.config.model = models[0]
        elif models and self.config.model not in models:
            shown = ", ".join(models[:5]) + (", ..." if len(models) > 5 else "")
            raise EndpointError(name, "unknown_model",
                                f"model '{self.config.model}' is not served (available: {shown})")

    async def _chat_preflight(self, models_error: EndpointError) -> None:
        """``GET /models`` gave nothing usable: one tiny chat request tells a bad key or model from a working one."""
        name = self.config.name
        if not self.config.model:
            raise EndpointError(name, "unknown_model", "GET /models is unavailable; pass --model") from None
        ping = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
        ex = await self.chat(ping, stream=False)
        if ex.error_class == "not_found" and self._v1_base() is not None:
            base = self.config.base_url
            self.rebase(self._v1_base() or base)
            ex_v1 = await self.chat(ping, stream=False)
            if ex_v1.ok or ex_v1.error_class == "auth":  # the API is under /v1 (and may refuse the key)
                self._say_v1(base, "POST /chat/completions")
                if ex_v1.ok:
                    return
                ex = ex_v1
            else:
                self.rebase(base)
        if ex.error_class == "auth":
            raise EndpointError(name, "auth", f"authentication failed (HTTP {ex.status}); check "
                                + (f"${self.config.api_key_env}" if self.config.api_key_env else "the API key"),
                                status=ex.status) from None
        if ex.error_class == "not_found":
            raise EndpointError(name, "unknown_model", f"model '{self.config.model}' not found (HTTP 404) at "
                                f"{self._shown_url}", status=404) from None
        if not ex.ok:
            raise EndpointError(name, "unreachable", f"test request failed: {ex.error_class} "
                                f"(HTTP {ex.status}): {ex.error_message}", status=ex.status) from None

    def _v1_base(self) -> str | None:
        """``<base>/v1`` when the base URL's path does not already end in ``/v1``."""
        base = self.config.base_url.rstrip("/")
        return None if httpx.URL(base).path.rstrip("/").endswith("/v1") else base + "/v1"

    async def _models_under_v1(self) -> list[str] | None:
        """``GET <base>/v1/models``'s list when it answers one (and the endpoint then uses ``<base>/v1``), else None."""
        v1 = self._v1_base()
        if v1 is None:
            return None
        base = self.config.base_url
        self.rebase(v1)
        try:
            models = await self.list_models()
        except EndpointError as e:
            if e.kind != "auth":
                self.rebase(base)
                return None
            self._say_v1(base, "GET /models")  # the API is under /v1, and it refuses the key: say both
            raise
        self._say_v1(base, "GET /models")
        return models

    def _say_v1(self, base: str, what: str) -> None:
        shown = redaction.redact_url(base.rstrip("/"))
        log.warning("endpoint '%s': %s is HTTP 404 at %s but answers at %s/v1; using %s/v1 "
                    "(write /v1 in the base URL to skip this check)", self.config.name, what, shown, shown, shown)

    def rebase(self, base_url: str) -> None:
        """Send every later request under ``base_url`` (same host: the connections and credentials still apply)."""
        self.config.base_url = base_url
        self._base = base_url.rstrip("/")
        self._urls.clear()
        self._request_headers = None

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
        """The line's body plus what the run must add; existing keys keep their place (dicts keep order)."""
        full = dict(body)
        if self.config.model and "model" not in full:
            full["model"] = self.config.model
        full["stream"] = stream
        if self._extra:
            full.update(self._extra)
        return full

    def _observe(self, fields: dict[str, Any]) -> None:
        status = fields.get("status")
        ok = fields.get("error_class") is None and status is not None and 200 <= status < 300
        was = self.stop.reason
        self.stop.observe(ok, fields.get("error_class"), status)
        if was is None and self.stop.reason is not None:
            log.warning("endpoint '%s': %s", self.config.name, self.stop.reason)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        jitter = self._rng.uniform(0, min(self.backoff_cap, self.backoff_base * (2 ** (attempt - 1))))
        return max(jitter, retry_after) if retry_after is not None else jitter

    async def _request(self, path: str, body: dict, stream: bool, *, chat: bool) -> Exchange:
        payload = wire_json(body)
        rhash = request_hash(body)
        http = self._open()
        url = self._urls.get(path)
        if url is None:  # parse each endpoint URL once: httpx re-parses strings on every request
            url = self._urls[path] = httpx.URL(self._base + path)
        retried: list[int] = []
        retried_usage: list[dict] = []
        attempts = 0
        max_attempts = max(1, self.config.max_attempts)
        delivery = Delivery()
        ledger = self.ledger if path in ("/chat/completions", "/completions") else None
        worst = (worst_case_usd(prompt_token_bound(payload), request_max_tokens(body), ledger.price)
                 if ledger is not None else 0.0)
        charged = 0.0
        while True:
            reservation = ledger.reserve(worst) if ledger is not None else None
            if ledger is not None and reservation is None:
                if attempts == 0:  # nothing was sent: not a measurement (the store keeps no record of it)
                    return Exchange(request_hash=rhash, attempts=0, stream=stream, error_class=BUDGET_REFUSED,
                                    error_message="not sent: the budget would be passed", charged_usd=0.0)
                break  # a retry the budget cannot cover: the last attempt's outcome stands
            attempts += 1
            if self._throttle is not None:
                async with self._throttle:
                    pass
            async with self._sem:
                if self.stop.reason is not None:  # every chat request refused: send no more (verifier.http.stopping)
                    if attempts == 1:
                        self.stop.not_sent += 1
                        return Exchange(request_hash=rhash, attempts=0, stream=stream, error_class=NOT_SENT,
                                        error_message=redaction.truncate(self.stop.reason, MESSAGE_LIMIT))
                    attempts -= 1
                    break  # a retry not sent: the record is the last attempt's
                t0 = time.perf_counter()
                ex, retry_after = await self._attempt(http, url, payload, stream, chat, t0, delivery)
                ex["latency_s"] = time.perf_counter() - t0
            if ledger is not None and reservation is not None:
                amount = settled_usd(ex, worst, ledger.price)
                ledger.settle(reservation, amount)
                charged += amount
            err = ex.get("error_class")
            if err not in RETRYABLE_ERRORS or attempts >= max_attempts:
                break
            # the HTTP status that caused the retry; 0 for transport failures (timeout, connection, broken stream)
            retried.append((ex.get("status") or 0) if err in ("rate_limited", "server_error") else 0)
            if isinstance(ex.get("usage"), dict):  # a retried attempt that reports usage may have been billed
                retried_usage.append(ex["usage"])
            await asyncio.sleep(self._backoff(attempts, retry_after))
        ex.setdefault("wire_issues", [])
        fields = {"request_hash": rhash, "attempts": attempts, "retried_statuses": retried, "stream": stream,
                  **_exchange_defaults(ex)}
        if delivery.resent_undelivered:
            fields["resent_undelivered"] = delivery.resent_undelivered
        if retried_usage:
            fields["retried_usage"] = retried_usage
        if ledger is not None:
            fields["charged_usd"] = charged
        if chat:
            store_once(fields)
            self._observe(fields)
        if redaction.secrets_registered():
            redact_fields(fields)
        try:
            return Exchange.model_validate(fields)
        except ValidationError as e:  # a shape our extraction did not foresee: keep the body, flag it, never crash
            fields.update(content=None, reasoning_content=None, tool_calls=[], logprobs=None, usage=_usage_dict(None),
                          finish_reason=None, error_class="malformed_response",
                          error_message=f"unexpected response shape: {e.errors()[0]['loc']}",
                          wire_issues=[*fields["wire_issues"], "unexpected_response_shape"])
            fields["response"] = fields["response"] if isinstance(fields["response"], dict) else None
            return Exchange.model_validate(fields)

    async def _attempt(self, http: HttpStack, url: httpx.URL, payload: bytes, stream: bool, chat: bool,
                       t0: float, delivery: Delivery) -> tuple[dict, float | None]:
        """One try, bounded by every deadline; always a dict of Exchange fields (plus a Retry-After or None)."""
        cfg = self.config
        deadline = asyncio.get_running_loop().time() + cfg.timeout
        # the status line once it has arrived, and what carried the request to the server (HttpStack.send)
        state: dict[str, Any] = {"status": None, "delivery": delivery}
        body: TimedBody | None = None
        try:
            async with asyncio.timeout_at(deadline) as scope:
                body = TimedBody(payload, scope, deadline, cfg.write_timeout)
                try:
                    if stream:
                        ex = await self._stream_once(http, url, body, t0, state)
                    else:
                        ex = await self._plain_once(http, url, body, chat, state)
                finally:
                    body.finished = True
            return ex, ex.pop("_retry_after", None)
        except TimeoutError:
            if body is not None and body.writing and body.write_deadline < deadline:
                msg = f"the request body was not taken within write_timeout ({cfg.write_timeout:g} s)"
            else:
                msg = f"the attempt passed its total timeout ({cfg.timeout:g} s)"
            return {"status": state["status"], "error_class": "timeout", "error_message": msg}, None
        except httpx.TimeoutException as e:
            return {"status": state["status"], "error_class": "timeout",
                    "error_message": timeout_line(e, cfg)}, None
        except MalformedHTTP as e:
            return {"status": state["status"], "error_class": "protocol_error",
                    "error_message": exception_line(e)}, None
        except (httpx.ConnectError, httpx.NetworkError, httpx.RemoteProtocolError) as e:
            cls = "broken_stream" if stream and state["status"] is not None else "connection"
            return {"status": state["status"], "error_class": cls, "error_message": exception_line(e),
                    **_partial_usage(state)}, None
        except _BrokenStream as e:
            return {"status": 200, "error_class": "broken_stream",
                    "error_message": redaction.truncate(str(e), MESSAGE_LIMIT), **_partial_usage(state)}, None
        except ResponseTooLarge as e:
            return {"status": state["status"], "error_class": "response_too_large",
                    "error_message": exception_line(e)}, None
        except UnsupportedEncoding as e:
            return {"status": state["status"], "error_class": "unsupported_encoding",
                    "error_message": redaction.truncate(str(e), MESSAGE_LIMIT)}, None
        except httpx.DecodingError as e:  # br/zstd/gzip bytes that do not decode: name the encoding
            return {"status": state["status"], "error_class": "transport_error",
                    "error_message": redaction.truncate(f"the response body is not valid Content-Encoding "
                                                        f"{state.get('encoding') or '?'}: {exception_line(e)}",
                                                        MESSAGE_LIMIT)}, None
        except httpx.HTTPError as e:  # decoding / protocol oddities: recorded, not retried
            return {"status": state["status"], "error_class": "transport_error",
                    "error_message": exception_line(e)}, None

    def _post(self, url: httpx.URL, body: TimedBody, accept: str | None = None) -> httpx.Request:
        """The request, built directly: ``AsyncClient.build_request`` re-parses the URL every time (~0.1 ms)."""
        if self._request_headers is None:
            http = self._open()
            self._request_headers = http.request_headers(url)
            self._timeout_ext = http.client.timeout.as_dict()
        headers = [*self._request_headers, ("content-length", str(len(body.payload)))]  # a length, not chunked
        if accept:
            headers = [(k, accept if k.lower() == "accept" else v) for k, v in headers]
        return httpx.Request("POST", url, content=body, headers=headers, extensions={"timeout": self._timeout_ext})

    def _classify(self, r: httpx.Response, text: str) -> dict:
        status = r.status_code
        if 300 <= status < 400:
            return {"status": status, "error_class": "redirect", "error_message": redirect_line(r)}
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
        return {"status": status, "error_class": cls, "error_message": redaction.truncate(msg, MESSAGE_LIMIT)}

    async def _read_capped(self, r: httpx.Response) -> bytes:
        """The whole (decompressed) body, refused past ``max_response_bytes``: a gzip bomb stops at the cap."""
        limit = self.config.max_response_bytes
        declared = r.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit and "content-encoding" not in r.headers:
            raise ResponseTooLarge(f"Content-Length {declared} is over the {limit}-byte response cap")
        parts: list[bytes] = []
        seen = 0
        async for chunk in r.aiter_bytes():
            seen += len(chunk)
            if seen > limit:
                raise ResponseTooLarge(f"response passed the {limit}-byte cap (counted after decompression)")
            parts.append(chunk)
        return b"".join(parts)

    async def _error_reply(self, r: httpx.Response) -> dict:
        try:
            raw = await self._read_capped(r)
        except ResponseTooLarge:
            raw = b""
        out = self._classify(r, raw.decode("utf-8", "replace"))
        out["_retry_after"] = parse_retry_after(r.headers.get("retry-after"))
        return out

    async def _plain_once(self, http: HttpStack, url: httpx.URL, body: TimedBody, chat: bool,
                          state: dict[str, Any]) -> dict:
        r = await http.send(self._post(url, body), state["delivery"])
        try:
            state["status"] = r.status_code
            if r.status_code >= 300:
                return await self._error_reply(r)
            _check_encoding(r, state)
            raw = await self._read_capped(r)
        finally:
            await r.aclose()
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as e:  # RecursionError: JSON nested past what the parser recurses into
            what = "nests too deep to read as JSON" if isinstance(e, RecursionError) else "is not JSON"
            return {"status": r.status_code, "error_class": "malformed_response",
                    "error_message": f"response body {what}", "wire_issues": ["malformed_response_body"]}
        if not chat:
            return {"status": r.status_code, "response": data}
        return _from_completion(r.status_code, data)

    async def _stream_once(self, http: HttpStack, url: httpx.URL, body: TimedBody, t0: float,
                           state: dict[str, Any]) -> dict:
        r = await http.send(self._post(url, body, "text/event-stream"), state["delivery"])
        try:
            state["status"] = r.status_code
            if r.status_code >= 300:
                return await self._error_reply(r)
            _check_encoding(r, state)
            acc = state["acc"] = _StreamAccumulator()  # kept: a stream that breaks may have reported usage
            capped = CappedText(r, self.config.max_response_bytes)
            async for sse in EventSource(capped).aiter_sse():  # type: ignore[arg-type]  # duck-typed response
                if acc.feed(sse.data, time.perf_counter() - t0, sse.event):
                    break
            if not acc.done and not acc.complete:  # a whole reply without [DONE] is kept (wire issue no_done)
                raise _BrokenStream(f"stream ended after {acc.events} events without [DONE], finish reason and usage")
            return acc.result(r.status_code)
        finally:
            await r.aclose()


def _check_encoding(r: httpx.Response, state: dict[str, Any]) -> None:
    """Refuse a body in a ``Content-Encoding`` nothing here decodes, before its bytes are misread as JSON or SSE.

    httpx decodes gzip, deflate, br (``brotli``) and zstd (``zstandard``) and passes any other value through
    undecoded, silently; a provider's unknown encoding is one clear line instead (not retried: it would come back
    the same).
    """
    state["encoding"] = r.headers.get("content-encoding")
    unknown = unsupported_encodings(r.headers)
    if unknown:
        shown = redaction.truncate(", ".join(unknown), 80)
        raise UnsupportedEncoding(f"the response is Content-Encoding: {shown}, which verifier cannot decode "
                                  "(it decodes gzip, deflate, br and zstd)")


def _partial_usage(state: dict[str, Any]) -> dict[str, Any]:
    """``{"usage": ...}`` when a stream that broke had already reported usage (the provider billed it), else {}."""
    usage = getattr(state.get("acc"), "usage", None)
    return {"usage": _usage_dict(usage)} if isinstance(usage, dict) else {}


class _NoCookies(http.cookiejar.CookieJar):
    """API calls carry no session state; parsing Set-Cookie on every response cost ~10% of client CPU."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None
