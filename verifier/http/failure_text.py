"""One-line texts for an attempt that failed: an exception, a timeout named by the deadline it passed, a redirect.

Why a module of its own: the client records every failure as one redacted line of bounded length, and these are
the words of those lines; keeping them apart keeps the client to its job (sending and classifying).
"""

from __future__ import annotations

import httpx

from verifier.http import redaction
from verifier.records import EndpointConfig

#: the longest error message a record keeps (after redaction)
MESSAGE_LIMIT = 500


def exception_line(e: BaseException) -> str:
    """``Type: text`` of an exception, redacted before it is cut to length."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return redaction.truncate(f"{type(e).__name__}: {text}" if text else type(e).__name__, MESSAGE_LIMIT) or ""


def timeout_line(e: httpx.TimeoutException, cfg: EndpointConfig) -> str:
    if isinstance(e, httpx.ConnectTimeout):
        return f"no connection within connect_timeout ({min(cfg.connect_timeout, cfg.timeout):g} s)"
    if isinstance(e, httpx.PoolTimeout):
        return f"no free connection within connect_timeout ({min(cfg.connect_timeout, cfg.timeout):g} s)"
    if isinstance(e, httpx.WriteTimeout):
        return f"the request body was not taken within write_timeout ({cfg.write_timeout:g} s)"
    if isinstance(e, httpx.ReadTimeout):
        return f"no byte received for read_timeout ({cfg.read_timeout:g} s)" if cfg.read_timeout else exception_line(e)
    return exception_line(e)


def redirect_line(r: httpx.Response) -> str:
    """A 3xx is recorded, never followed (a request is sent once): name the status and where it pointed."""
    location = r.headers.get("location")
    where = f" to {redaction.redact_url(location)}" if location else " without a Location header"
    return redaction.truncate(f"redirect (HTTP {r.status_code}){where}; redirects are not followed",
                              MESSAGE_LIMIT) or ""
