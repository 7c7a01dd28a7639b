"""Which endpoints a run talks to: from CLI flags, a TOML endpoints file, or the built-in default.

An endpoint is either a remote OpenAI-compatible URL or ``builtin:NAME[?kv=fp8&weights=int4&decode_weights=int4
&prefix_cache=0]``, the reference engine started on 127.0.0.1 for the user. Built-ins are resolved to real
URLs by :class:`BuiltinServers` just before the run, so the rest of the harness never special-cases them.
Only the *name* of an API key's env var is kept here; the key itself is read by the client at the last moment.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
import tomllib
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from verifier.http import redaction
from verifier.records import EndpointConfig, StatedClaims
from verifier.run.summary import EndpointInfo

log = logging.getLogger(__name__)

BUILTIN_PREFIX = "builtin:"
_BUILTIN_KEYS = {"kv", "weights", "decode_weights", "prefix_cache", "page_size"}
_TOML_FIELDS = set(EndpointConfig.model_fields) - {"name"}

#: The default comparison when no endpoint is given: the engine in BF16 against its own quantised variants.
DEFAULT_ENDPOINTS: list[tuple[str, str]] = [
    ("bf16", "builtin:tiny"),
    ("fp8-kv", "builtin:tiny?kv=fp8"),
    ("int4-decode", "builtin:tiny?decode_weights=int4"),
    ("fp8-kv+int4-decode", "builtin:tiny?kv=fp8&decode_weights=int4"),
]


#: In-flight requests to a built-in engine when the user names none (a remote endpoint's default stays
#: ``EndpointConfig.concurrency``, 8: providers rate-limit). Why higher: the engine is local and batches every request
#: in flight into one decode step, whose cost on a CPU is mostly per-step overhead, so 32 at a time take about as long
#: as 8; the default run took ~31 s instead of ~38 s on a 2-core machine (benchmarks/default_run.py), with the same
#: figures (a measured request's numbers do not depend on its batch-mates: docs/CONTRACTS.md).
BUILTIN_CONCURRENCY = 32


class EndpointConfigError(ValueError):
    """Bad endpoint input; the message is one line naming the flag or file and field."""


@dataclass
class BuiltinSpec:
    """A parsed ``builtin:`` URL: which checkpoint and which precision options the engine is started with."""

    model: str  # "tiny" or a checkpoint path
    kv: str = "bf16"
    weights: str = "bf16"
    decode_weights: str | None = None
    prefix_cache: bool = True
    page_size: int | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"model": self.model, "kv": self.kv, "weights": self.weights,
                             "decode_weights": self.decode_weights, "prefix_cache": self.prefix_cache}
        if self.page_size is not None:
            d["page_size"] = self.page_size
        return d

    def short_name(self) -> str:
        opts = [f"kv={self.kv}"] if self.kv != "bf16" else []
        opts += [f"weights={self.weights}"] if self.weights != "bf16" else []
        opts += [f"decode_weights={self.decode_weights}"] if self.decode_weights else []
        opts += ["prefix_cache=0"] if not self.prefix_cache else []
        base = Path(self.model).name if self.model != "tiny" else "tiny"
        return base + (":" + ",".join(opts) if opts else "")


def parse_builtin(url: str, *, where: str = "endpoint") -> BuiltinSpec | None:
    """``builtin:tiny?kv=fp8`` -> BuiltinSpec; None for ordinary URLs; EndpointConfigError for bad options."""
    if not url.startswith(BUILTIN_PREFIX):
        return None
    rest = url[len(BUILTIN_PREFIX):]
    name, _, query = rest.partition("?")
    if not name:
        raise EndpointConfigError(f"{where}: '{url}' names no model (write builtin:tiny or builtin:/path/to/ckpt)")
    spec = BuiltinSpec(model=name)
    for key, values in urllib.parse.parse_qs(query, keep_blank_values=True, strict_parsing=False).items():
        if key not in _BUILTIN_KEYS:
            raise EndpointConfigError(f"{where}: unknown builtin option '{key}' in '{url}' "
                                      f"(known: {', '.join(sorted(_BUILTIN_KEYS))})")
        v = values[-1]
        if key == "kv":
            if v not in ("bf16", "fp8", "fp16", "fp32"):
                raise EndpointConfigError(f"{where}: kv must be bf16/fp8/fp16/fp32, got '{v}'")
            spec.kv = v
        elif key in ("weights", "decode_weights"):
            if v not in ("bf16", "int4", "fp16", "fp32"):
                raise EndpointConfigError(f"{where}: {key} must be bf16/int4/fp16/fp32, got '{v}'")
            setattr(spec, key, v)
        elif key == "prefix_cache":
            if v not in ("0", "1", "true", "false"):
                raise EndpointConfigError(f"{where}: prefix_cache must be 0 or 1, got '{v}'")
            spec.prefix_cache = v in ("1", "true")
        elif key == "page_size":
            try:
                spec.page_size = int(v)
            except ValueError:
                raise EndpointConfigError(f"{where}: page_size must be an integer, got '{v}'") from None
    return spec


@dataclass
class EndpointSet:
    """The endpoints of a run, reference first. ``sources[name]`` is what the user wrote (URL or builtin:...)."""

    endpoints: list[EndpointConfig]
    reference: str
    sources: dict[str, str] = field(default_factory=dict)
    profiles: str | None = None  # [fingerprint] profiles = "FILE" in a TOML file: the run's kl_profiles default

    def __post_init__(self) -> None:
        """A built-in engine whose concurrency nobody set (flag, TOML field, a resumed run's manifest) takes
        BUILTIN_CONCURRENCY: one rule for every way an endpoint set is built."""
        for e in self.endpoints:
            if ("concurrency" not in e.model_fields_set
                    and self.sources.get(e.name, e.base_url).startswith(BUILTIN_PREFIX)):
                e.concurrency = BUILTIN_CONCURRENCY

    @property
    def candidates(self) -> list[str]:
        return [e.name for e in self.endpoints if e.name != self.reference]

    def get(self, name: str) -> EndpointConfig:
        for e in self.endpoints:
            if e.name == name:
                return e
        raise KeyError(name)

    def builtin(self, name: str) -> BuiltinSpec | None:
        return parse_builtin(self.sources.get(name, ""), where=name)

    def info(self) -> list[EndpointInfo]:
        """Endpoints as published in results: no key, no header values, no URL userinfo, only the env var's name."""
        out = []
        for e in self.endpoints:
            spec = self.builtin(e.name)
            url = self.sources.get(e.name, e.base_url) if spec else e.base_url
            out.append(EndpointInfo(name=e.name, base_url=redaction.redact_url(url) or "",
                                    model=e.model, api_key_env=e.api_key_env, extra_body=e.extra_body,
                                    is_reference=e.name == self.reference, builtin=spec.as_dict() if spec else None,
                                    price=e.price, budget=e.budget, claims=e.claims))
        return out


def _split_named(value: str) -> tuple[str | None, str]:
    """``name=URL`` -> (name, URL); a bare URL (which may itself contain '=' in its query) -> (None, URL)."""
    head, sep, tail = value.partition("=")
    if sep and "://" not in head and not head.startswith(BUILTIN_PREFIX) and head and "?" not in head:
        return head, tail
    return None, value


def _default_name(url: str, taken: set[str]) -> str:
    spec = parse_builtin(url)
    if spec is not None:
        base = spec.short_name()
    else:
        parsed = urllib.parse.urlparse(url)
        base = parsed.hostname or "endpoint"
        if parsed.port and parsed.hostname in ("127.0.0.1", "localhost"):
            base += f":{parsed.port}"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}-{i}", i + 1
    return name


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: how API keys of common providers begin (OpenAI, Anthropic, OpenRouter, Groq, xAI, Google, Hugging Face, GitHub, ...)
_KEY_PREFIXES = ("sk-", "sk_", "rk-", "pk-", "gsk_", "xai-", "AIza", "hf_", "ghp_", "github_pat_", "nvapi-", "csk-",
                 "r8_", "fw_", "pplx-", "tgp_", "Bearer ")


def check_key_env_name(value: str, where: str) -> None:
    """``--api-key-env``/``api_key_env`` takes a variable's *name*; a value that is not one, or that looks like a key,
    is refused in one line that does not repeat it (a key pasted there must not reach the terminal or a log).

    Why both tests: ``sk-...`` is no valid name, but some keys are (letters, digits, underscores); a value that
    starts like a provider's key, or is long, mixed-case and not set in the environment, is taken for a key.
    """
    looks_like_key = value.startswith(_KEY_PREFIXES) or (
        len(value) >= 24 and value not in os.environ and any(c.islower() for c in value)
        and any(c.isdigit() for c in value))
    if _ENV_NAME.fullmatch(value) and not looks_like_key:
        return
    redaction.register(value)  # whatever it is, it is never printed or stored from here on
    what = ("looks like an API key itself" if looks_like_key or len(value) >= 20
            else "is not an environment variable name")
    raise EndpointConfigError(f"{where}: the value given {what} (not shown); pass the NAME of the variable that holds "
                              "the key, e.g. export OPENAI_API_KEY=... then --api-key-env OPENAI_API_KEY")


def _check_url(url: str, where: str) -> None:
    if url.startswith(BUILTIN_PREFIX):
        parse_builtin(url, where=where)
        return
    redaction.register_url(url)  # userinfo is a secret from the moment it is read
    shown = redaction.redact_url(url)
    try:
        parsed = urllib.parse.urlparse(url)
        parsed.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as e:
        raise EndpointConfigError(f"{where}: '{shown}' is not a valid URL ({e})") from None
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise EndpointConfigError(f"{where}: '{shown}' is not an http(s) URL or builtin:NAME")


def from_flags(reference: str | None, endpoints: list[str], *, model: str | None = None,
               api_key_env: str | None = None, stream: bool | None = None) -> EndpointSet:
    """Build the endpoint set from ``--reference``/``--endpoint``/``--model``/``--api-key-env``.

    With no endpoints at all, the built-in default comparison is used. Without ``--reference``, the first
    ``--endpoint`` is the reference.
    """
    if api_key_env is not None:
        check_key_env_name(api_key_env, "--api-key-env")
    if reference is None and not endpoints:
        return default_endpoints(stream=stream)
    entries: list[tuple[str | None, str, str]] = []
    if reference is not None:
        n, u = _split_named(reference)
        entries.append((n, u, "--reference"))
    for e in endpoints:
        n, u = _split_named(e)
        entries.append((n, u, "--endpoint"))
    configs: list[EndpointConfig] = []
    sources: dict[str, str] = {}
    taken: set[str] = set()
    for name, url, flag in entries:
        _check_url(url, f"{flag} {redaction.redact_url(url)}")
        if name is None:
            name = "reference" if flag == "--reference" else _default_name(url, taken)
        if name in taken:
            raise EndpointConfigError(f"{flag}: endpoint name '{name}' is used twice")
        taken.add(name)
        builtin = url.startswith(BUILTIN_PREFIX)
        cfg = EndpointConfig(name=name, base_url=url, model=None if builtin else model,
                             api_key_env=None if builtin else api_key_env)
        if stream is not None:
            cfg.stream = stream
        configs.append(cfg)
        sources[name] = url
    return EndpointSet(configs, configs[0].name, sources)


def default_endpoints(*, stream: bool | None = None) -> EndpointSet:
    configs = [EndpointConfig(name=n, base_url=u, stream=bool(stream)) for n, u in DEFAULT_ENDPOINTS]
    return EndpointSet(configs, "bf16", {n: u for n, u in DEFAULT_ENDPOINTS})


def load_config(path: Path, *, stream: bool | None = None, api_key_env: str | None = None) -> EndpointSet:
    """Read a TOML endpoints file.

    Either ``[endpoints.NAME]`` tables or ``[[endpoints]]`` entries with a ``name``; each has ``base_url`` and
    optional model, api_key_env, headers, extra_body, rate, concurrency, timeout, stream, max_attempts,
    price = { input, output, cached_input } (USD per 1M tokens) and budget (USD). A
    top-level ``reference = "NAME"`` picks the reference (default: the first endpoint).
    """
    path = Path(path)
    if api_key_env is not None:
        check_key_env_name(api_key_env, "--api-key-env")
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise EndpointConfigError(f"{path}: file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise EndpointConfigError(f"{path}: not valid TOML ({e})") from None
    except UnicodeDecodeError as e:  # a binary or non-UTF-8 file: TOML is UTF-8
        raise EndpointConfigError(f"{path}: not UTF-8 text "
                                  f"(byte 0x{e.object[e.start]:02x} at offset {e.start})") from None
    except OSError as e:  # a folder, no permission, ...
        raise EndpointConfigError(f"{path}: cannot read ({e.strerror or e})") from None
    unknown_top = set(data) - {"reference", "endpoints", "fingerprint"}
    if unknown_top:
        raise EndpointConfigError(f"{path}: unknown top-level key(s) {sorted(unknown_top)} "
                                  "(expected 'reference', 'endpoints' and 'fingerprint')")
    profiles = _fingerprint_profiles(path, data.get("fingerprint"))
    raw = data.get("endpoints")
    items: list[tuple[str, dict]] = []
    if isinstance(raw, dict):
        for name, body in raw.items():
            if not isinstance(body, dict):
                raise EndpointConfigError(f"{path}: endpoints.{name} must be a table")
            if "name" in body and body["name"] != name:
                raise EndpointConfigError(f"{path}: endpoints.{name}.name disagrees with its table name")
            items.append((name, {k: v for k, v in body.items() if k != "name"}))
    elif isinstance(raw, list):
        for i, body in enumerate(raw):
            if not isinstance(body, dict) or not isinstance(body.get("name"), str):
                raise EndpointConfigError(f"{path}: endpoints[{i}].name is missing (each [[endpoints]] needs a name)")
            items.append((body["name"], {k: v for k, v in body.items() if k != "name"}))
    else:
        raise EndpointConfigError(f"{path}: no endpoints (add [endpoints.NAME] tables with a base_url)")
    if not items:
        raise EndpointConfigError(f"{path}: no endpoints (add [endpoints.NAME] tables with a base_url)")
    configs: list[EndpointConfig] = []
    sources: dict[str, str] = {}
    for name, body in items:
        where = f"{path}: endpoints.{name}"
        unknown = set(body) - _TOML_FIELDS
        if unknown:
            raise EndpointConfigError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(_TOML_FIELDS)}")
        if "base_url" not in body:
            raise EndpointConfigError(f"{where}.base_url is missing")
        if not isinstance(body["base_url"], str):
            raise EndpointConfigError(f"{where}.base_url must be a string")
        _check_url(body["base_url"], f"{where}.base_url")
        _check_claims_keys(body.get("claims"), where)
        if name in sources:
            raise EndpointConfigError(f"{where}: endpoint name used twice")
        if isinstance(body.get("api_key_env"), str):
            check_key_env_name(body["api_key_env"], f"{where}.api_key_env")
        if api_key_env and "api_key_env" not in body and not body["base_url"].startswith(BUILTIN_PREFIX):
            body = {**body, "api_key_env": api_key_env}
        try:
            cfg = EndpointConfig(name=name, **body)
        except ValidationError as e:
            err = e.errors()[0]
            field_name = ".".join(str(x) for x in err["loc"])
            raise EndpointConfigError(f"{where}.{field_name}: {err['msg']}") from None
        redaction.register_headers(cfg.headers)
        if stream is not None:
            cfg.stream = stream
        configs.append(cfg)
        sources[name] = body["base_url"]
    reference = data.get("reference", configs[0].name)
    if reference not in sources:
        raise EndpointConfigError(f"{path}: reference = '{reference}' is not one of the endpoints {list(sources)}")
    configs.sort(key=lambda c: c.name != reference)
    return EndpointSet(configs, reference, sources, profiles=profiles)


def _check_claims_keys(claims: Any, where: str) -> None:
    """``claims = {...}``: a table of known keys only; a typo (``quantisation``) is refused, never ignored."""
    if claims is None:
        return
    if not isinstance(claims, dict):
        raise EndpointConfigError(f"{where}.claims must be a table, e.g. claims = {{ quantization = \"fp8\" }}")
    for key in claims:
        if key not in StatedClaims.model_fields:
            raise EndpointConfigError(f"{where}.claims: unknown key '{key}' "
                                      f"(known: {', '.join(StatedClaims.model_fields)})")


def _fingerprint_profiles(path: Path, table: Any) -> str | None:
    """``[fingerprint] profiles = "FILE"``: a profile library (``verifier fingerprint build``), relative to the TOML."""
    if table is None:
        return None
    if not isinstance(table, dict) or set(table) - {"profiles"} or not isinstance(table.get("profiles"), str):
        raise EndpointConfigError(f'{path}: [fingerprint] takes one key, profiles = "FILE" (a profile library)')
    return str((path.parent / table["profiles"]) if not Path(table["profiles"]).is_absolute() else table["profiles"])


def check_keys(endpoints: EndpointSet) -> None:
    """Every named key env var must be set: fail before any request with the endpoint and variable named."""
    for e in endpoints.endpoints:
        if e.api_key_env:
            check_key_env_name(e.api_key_env, f"endpoint '{e.name}': api_key_env")
        if e.api_key_env and not os.environ.get(e.api_key_env):
            raise EndpointConfigError(f"endpoint '{e.name}': environment variable {e.api_key_env} is not set")
        if e.api_key_env:
            redaction.register(os.environ[e.api_key_env])


class BuiltinStartError(RuntimeError):
    """A built-in engine could not be started (missing checkpoint, bad option combination, ...); one line."""


class BuiltinServers(contextlib.AbstractContextManager):
    """Starts the reference engine for every ``builtin:`` endpoint and points its config at the live URL.

    Every engine runs in its own process (:mod:`reference_engine.engine_process`), so the engines and the run
    use all cores; all are started before any is waited for, and engines of one weight format share one read of
    the checkpoint.
    """

    def __init__(self, endpoints: EndpointSet) -> None:
        self.endpoints = endpoints
        self._servers: list[Any] = []

    def __enter__(self) -> BuiltinServers:
        specs = {e.name: self.endpoints.builtin(e.name) for e in self.endpoints.endpoints}
        if not any(specs.values()):
            return self
        try:  # lazy: torch is only needed for built-ins
            from reference_engine.config import engine_config
            from reference_engine.engine_process import START_TIMEOUT_S, EngineProcess, SharedLoads
        except ImportError as e:
            raise EndpointConfigError("builtin endpoints need the reference engine, "
                                      f"which failed to import: {e}") from None
        shared = SharedLoads()
        try:
            starting = []
            for cfg in self.endpoints.endpoints:
                spec = specs[cfg.name]
                if spec is None:
                    continue
                kwargs: dict[str, Any] = dict(kv_dtype=spec.kv, weights=spec.weights,
                                              decode_weights=spec.decode_weights,
                                              prefix_cache=spec.prefix_cache)
                if spec.page_size is not None:
                    kwargs["page_size"] = spec.page_size
                log.info("starting builtin engine for '%s' (%s)", cfg.name, spec.short_name())
                with self._start_failure(cfg):
                    proc = EngineProcess(engine_config(None if spec.model == "tiny" else spec.model, **kwargs), shared)
                self._servers.append(proc)
                starting.append((cfg, proc))
            deadline = time.monotonic() + START_TIMEOUT_S
            for cfg, proc in starting:
                with self._start_failure(cfg):
                    cfg.base_url = proc.wait_ready(deadline)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    @contextlib.contextmanager
    def _start_failure(self, cfg: EndpointConfig) -> Iterator[None]:
        """Any failure to start ``cfg``'s engine becomes one BuiltinStartError line naming the endpoint."""
        try:
            yield
        except Exception as e:  # noqa: BLE001 - any engine failure becomes one clear line
            from reference_engine.engine_process import EngineStartError

            msg = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
            what = msg if isinstance(e, EngineStartError) else f"{type(e).__name__}: {msg}"
            source = self.endpoints.sources.get(cfg.name)
            raise BuiltinStartError(f"endpoint '{cfg.name}': the built-in engine ({source}) "
                                    f"failed to start: {what}") from None

    def __exit__(self, *exc: Any) -> None:
        for srv in self._servers:
            srv.request_stop()
        while self._servers:
            srv = self._servers.pop()
            try:
                srv.stop()
            except Exception as e:  # noqa: BLE001 - shutting down; report, don't mask the run's own error
                log.warning("builtin engine did not stop cleanly: %s", e)
