"""Every configured secret in one place, and the one function that takes them out of text.

Why one module: a key can come back from many directions (a provider that echoes the request into model
content or tool arguments, an error body, an exception message that quotes a URL with ``user:password@``, a
log line). Redacting at each place by hand is how a path gets forgotten, so every secret the run is
configured with is registered here once (:func:`register`), and every string that is stored or printed goes
through :func:`redact` *before* it is cut to a length limit: cutting first can leave a key's prefix behind.

What counts as a secret: API keys read from env vars, the values of secret-looking headers (``Authorization``,
``X-Api-Key``, anything with key/token/secret/cookie/password/auth in its name), URL userinfo (user and
password, and the ``Basic`` token built from them). Values shorter than :data:`MIN_SECRET_LEN` are not
registered: redacting every ``"abc"`` in model output would wreck the text and protect nothing.

Registration also installs a log-record factory, so log lines written by any module are redacted before any
handler formats them.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import urllib.parse
from typing import Any

#: What a secret is replaced with.
MASK = "***"
#: The marker left where URL userinfo was (also tells ``--resume`` that the URL needs the config again).
URL_USERINFO_MASK = "<redacted>"
#: Shorter values are not treated as secrets (see the module docstring).
MIN_SECRET_LEN = 4
#: A text that ends in this many characters of a secret's start is assumed cut through the secret.
_DANGLING_PREFIX_LEN = 4

_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|password|session|sig", re.IGNORECASE)
#: Query parameters whose values are credentials (``?api_key=``, ``&sig=``, ``X-Amz-Signature``...).
_SECRET_PARAM = _SECRET_HEADER
#: What a public URL shows instead of a credential-like query value.
QUERY_MASK = "REDACTED"
_USERINFO = re.compile(r"(?<=//)[^/?#@\s]*@")

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()
_pattern: re.Pattern[str] | None = None
_factory_installed = False


def is_secret_header(name: str) -> bool:
    """Headers whose values are credentials (``Authorization``, ``X-Api-Key``, ``Cookie``, ...)."""
    return bool(_SECRET_HEADER.search(name))


def register(*values: str | None) -> None:
    """Add secret values; every later :func:`redact` removes them. Idempotent and thread-safe."""
    global _secrets, _pattern
    new = [v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LEN and v not in _secrets]
    if not new:
        return
    with _lock:
        merged = sorted(set(_secrets) | set(new), key=len, reverse=True)  # longest first: no partial overlap left
        _secrets = tuple(merged)
        _pattern = re.compile("|".join(re.escape(s) for s in merged))
    _install_log_factory()


def register_url(url: str | None) -> None:
    """Register the userinfo of ``url`` (user, password, and the Basic token httpx builds from them)."""
    if not url:
        return
    try:
        parts = urllib.parse.urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        m = _USERINFO.search(url)
        if m:
            register(m.group(0)[:-1])
        return
    if user is None and password is None:
        return
    user_raw = urllib.parse.unquote(user or "")
    pw_raw = urllib.parse.unquote(password or "")
    token = base64.b64encode(f"{user_raw}:{pw_raw}".encode()).decode()
    # The user name alone is not registered: it is no secret, and a common one ("admin", "alice") would be masked
    # in every model reply that mentions it, corrupting the measurement. URLs are shown with the whole userinfo
    # masked (redact_url), and "user:password" and the Basic token carry the password.
    register(password, pw_raw, f"{user}:{password}" if password else None, f"{user_raw}:{pw_raw}" if pw_raw else None,
             token if pw_raw else None)


def register_headers(headers: dict[str, str]) -> None:
    """Register the values of every secret-looking header (and the bare token of ``Bearer``/``Basic`` ones)."""
    for name, value in headers.items():
        if is_secret_header(name) and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            register(value, token.strip() if scheme.lower() in ("bearer", "basic", "token") else None)


def forget_all() -> None:
    """Drop every registered secret. For a process that runs several independent runs (tests, a library user):
    one run's secrets must not mask another run's model output."""
    global _secrets, _pattern
    with _lock:
        _secrets, _pattern = (), None


def secrets_registered() -> int:
    return len(_secrets)


def redact(text: str | None) -> str | None:
    """``text`` with every registered secret replaced by :data:`MASK` (None stays None)."""
    if text is None or _pattern is None or not isinstance(text, str):
        return text
    return _pattern.sub(MASK, text)


def redact_message(text: str | None) -> str | None:
    """:func:`redact`, then also mask a trailing start of a secret (left by a cut made before we saw the text)."""
    text = redact(text)
    if not text or not _secrets:
        return text
    for s in _secrets:
        for n in range(min(len(s) - 1, len(text)), _DANGLING_PREFIX_LEN - 1, -1):
            if text.endswith(s[:n]):
                return text[:-n] + MASK
    return text


def truncate(text: str | None, limit: int) -> str | None:
    """Redact, then cut to ``limit`` characters: the only safe order."""
    text = redact(text)
    return text if text is None or len(text) <= limit else text[:limit]


def redact_tree(obj: Any) -> Any:
    """A copy of a JSON-like value with every string (keys included) redacted; the same object when no secret."""
    if _pattern is None:
        return obj
    return _walk(obj)


def _walk(obj: Any) -> Any:
    if isinstance(obj, str):
        return _pattern.sub(MASK, obj) if _pattern is not None else obj
    if isinstance(obj, dict):
        return {_walk(k) if isinstance(k, str) else k: _walk(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_walk(v) for v in obj]
    return obj


def public_url(url: str) -> str:
    """A URL as a report or a profile file may show it: no ``user:password@``, no fragment, and the values of
    credential-like query parameters replaced by :data:`QUERY_MASK`; a ``builtin:`` spec as it is.

    Unlike :func:`redact_url` (which masks the values registered as secrets of this run), this needs no registry:
    it is for URLs written into files that outlive the run.
    """
    if url.startswith("builtin:"):
        return url
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urllib.parse.urlencode([(k, QUERY_MASK if _SECRET_PARAM.search(k) else v)
                                    for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)])
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def redact_url(url: str | None) -> str | None:
    """The URL without its userinfo (``https://user:pw@host`` -> ``https://<redacted>@host``), then redacted."""
    if url is None:
        return None
    return redact(_USERINFO.sub(URL_USERINFO_MASK + "@", url, count=1))


def _install_log_factory() -> None:
    """Redact every log record's message (and formatted traceback) when it is created, whoever logs it."""
    global _factory_installed
    with _lock:
        if _factory_installed:
            return
        _factory_installed = True
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a bad format string is the logger's problem, not ours
                return record
            record.msg, record.args = redact(message), None
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            return record

        logging.setLogRecordFactory(factory)
