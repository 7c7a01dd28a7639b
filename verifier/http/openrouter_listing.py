"""OpenRouter's per-model provider listing (``GET /api/v1/models/{author}/{slug}/endpoints``) as endpoints to verify.

Why: the listing is where providers *state* their precision (``quantization``), context length, parameters and
implicit caching, and their prices; turning it into an endpoints file (one pinned endpoint per provider, each with
its ``price`` and ``claims``) makes every statement something a run checks. The response shape follows OpenRouter's
API reference (``data.endpoints[]`` with name, provider_name, tag, quantization, context_length, pricing,
supported_parameters, supports_implicit_caching, ...); every field is treated as optional, because listings differ
by model and age, and a field of an unexpected type is dropped with a note rather than guessed.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verifier.records import Price, StatedClaims

DEFAULT_API_BASE = "https://openrouter.ai"
OPENROUTER_CHAT_BASE = "/api/v1"  # chat completions live under the same base: {api_base}/api/v1/chat/completions
API_KEY_ENV = "OPENROUTER_API_KEY"


class ListingError(ValueError):
    """The listing cannot be fetched or read; one line naming the URL or file and the field."""


class ListedEndpoint(BaseModel):
    """One provider endpoint of the listing. Loose on purpose: fields are checked where they are used."""

    model_config = ConfigDict(extra="ignore")

    name: Any = None
    provider_name: Any = None
    tag: Any = None
    quantization: Any = None
    context_length: Any = None
    pricing: Any = None
    supported_parameters: Any = None
    supports_implicit_caching: Any = None
    status: Any = None


class ListingData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    name: str | None = None
    endpoints: list[ListedEndpoint] = Field(default_factory=list)


class Listing(BaseModel):
    model_config = ConfigDict(extra="ignore")

    data: ListingData


class ImportedEndpoint(BaseModel):
    """An endpoints-file entry made from one listed provider."""

    name: str
    provider: str  # the provider's display name
    tag: str  # what ``provider.only`` pins to
    base_url: str
    model: str
    api_key_env: str = API_KEY_ENV
    extra_body: dict[str, Any]
    price: Price | None = None
    claims: StatedClaims
    notes: list[str] = Field(default_factory=list)  # fields left out, and why


def parse_listing(text: str | bytes, where: str) -> Listing:
    """The listing JSON -> :class:`Listing`, or a :class:`ListingError` naming ``where`` and the field."""
    try:
        return Listing.model_validate_json(text)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        raise ListingError(f"{where}: not an OpenRouter endpoints listing (field {loc}: {err['msg']})") from None


def fetch_listing(model: str, api_base: str, *, api_key: str | None = None, timeout: float = 30.0) -> Listing:
    """GET the listing of ``author/slug`` from ``api_base`` (OpenRouter, or a loopback server in tests)."""
    author, _, slug = model.partition("/")
    if not author or not slug or "/" in slug:
        raise ListingError(f"model '{model}': expected AUTHOR/SLUG, e.g. deepseek/deepseek-chat-v3.1")
    url = f"{api_base.rstrip('/')}/api/v1/models/{author}/{slug}/endpoints"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(url, headers=headers, timeout=timeout, follow_redirects=True)
    except httpx.HTTPError as e:
        raise ListingError(f"GET {url}: {type(e).__name__}: {e}") from None
    if r.status_code != 200:
        raise ListingError(f"GET {url}: HTTP {r.status_code} {r.text[:200].strip()}")
    return parse_listing(r.content, f"GET {url}")


def per_million(value: Any) -> float | None:
    """A per-token price string ("0.0000006") as USD per 1M tokens (0.6); None when absent, negative or not a number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        d = Decimal(str(value))
    except InvalidOperation:
        return None
    if not d.is_finite() or d < 0:  # OpenRouter writes "-1" for prices that vary per request
        return None
    return float(d * 1_000_000)


def _price(pricing: Any, notes: list[str]) -> Price | None:
    if not isinstance(pricing, dict):
        notes.append("no pricing listed")
        return None
    inp, out = per_million(pricing.get("prompt")), per_million(pricing.get("completion"))
    if inp is None or out is None:
        notes.append("price left out: pricing.prompt or pricing.completion missing or not a price")
        return None
    return Price(input=inp, output=out, cached_input=per_million(pricing.get("input_cache_read")))


def _claims(e: ListedEndpoint, notes: list[str]) -> StatedClaims:
    q = e.quantization if isinstance(e.quantization, str) and e.quantization.strip() else None
    if q is None or q.lower() == "unknown":
        notes.append("no quantization label")
        q = None
    ctx = e.context_length if isinstance(e.context_length, int | float) and not isinstance(
        e.context_length, bool) and e.context_length > 0 else None
    params = [p for p in e.supported_parameters if isinstance(p, str)] if isinstance(
        e.supported_parameters, list) else None
    caching = e.supports_implicit_caching if isinstance(e.supports_implicit_caching, bool) else None
    return StatedClaims(quantization=q, context_length=int(ctx) if ctx is not None else None,
                        supported_parameters=params, implicit_caching=caching)


def endpoint_name(tag: str, taken: set[str]) -> str:
    """A provider tag ("deepinfra/fp8") as an endpoint name ("deepinfra-fp8"), unique in ``taken``."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", tag).strip("-.") or "provider"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}-{i}", i + 1
    taken.add(name)
    return name


def to_endpoints(listing: Listing, model: str, api_base: str) -> list[ImportedEndpoint]:
    """One pinned endpoint per listed provider (no fallback to another provider), with its price and claims."""
    taken: set[str] = set()
    out: list[ImportedEndpoint] = []
    for i, e in enumerate(listing.data.endpoints):
        tag = e.tag if isinstance(e.tag, str) and e.tag.strip() else None
        provider = e.provider_name if isinstance(e.provider_name, str) and e.provider_name.strip() else None
        if tag is None and provider is None:
            raise ListingError(f"data.endpoints[{i}]: neither tag nor provider_name: cannot pin this provider")
        notes: list[str] = [] if tag else ["no tag listed: pinned by provider name"]
        pin = tag or str(provider)
        out.append(ImportedEndpoint(
            name=endpoint_name(pin, taken), provider=provider or pin, tag=pin,
            base_url=f"{api_base.rstrip('/')}{OPENROUTER_CHAT_BASE}", model=listing.data.id or model,
            extra_body={"provider": {"only": [pin], "allow_fallbacks": False}},
            price=_price(e.pricing, notes), claims=_claims(e, notes), notes=notes))
    if not out:
        raise ListingError(f"model '{model}': the listing has no endpoints")
    return out


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def pick_reference(endpoints: list[ImportedEndpoint], model: str, wanted: str | None) -> str:
    """``--reference NAME`` (an endpoint name, tag or provider name), else the first-party provider: the one whose
    provider name or tag matches the model's author (``deepseek/...`` -> DeepSeek)."""
    if wanted is not None:
        for e in endpoints:
            if _key(wanted) in (_key(e.name), _key(e.tag), _key(e.provider)):
                return e.name
        raise ListingError(f"--reference {wanted}: no such provider in the listing "
                           f"({', '.join(e.name for e in endpoints)})")
    author = _key(model.partition("/")[0])
    for e in endpoints:
        if author and author in (_key(e.provider), _key(e.tag.partition("/")[0])):
            return e.name
    raise ListingError(f"no first-party provider for '{model.partition('/')[0]}' in the listing "
                       f"({', '.join(e.provider for e in endpoints)}); name one with --reference NAME")
