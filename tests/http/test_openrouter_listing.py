"""OpenRouter's provider listing -> pinned endpoints with prices and claims (verifier/http/openrouter_listing.py).

The fixture ``tests/cli/data/openrouter_endpoints.json`` is written from OpenRouter's API reference ("List all
endpoints for a model"): four providers, one with a cache price, one without ``input_cache_read``, one with no
``quantization`` and no ``completion`` price, ``supported_parameters`` or ``supports_implicit_caching``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier.http.openrouter_listing import (
    ListingError,
    parse_listing,
    per_million,
    pick_reference,
    to_endpoints,
)

FIXTURE = Path(__file__).resolve().parents[1] / "cli" / "data" / "openrouter_endpoints.json"
MODEL = "verifier/tiny-chat"


def _endpoints(text: str | None = None) -> list:
    listing = parse_listing(text or FIXTURE.read_text(), "fixture")
    return to_endpoints(listing, MODEL, "http://127.0.0.1:1")


def test_per_token_strings_become_usd_per_million() -> None:
    assert per_million("0.0000006") == pytest.approx(0.6)
    assert per_million("0.00000015") == pytest.approx(0.15)
    assert per_million("0") == 0.0
    assert per_million("-1") is None  # OpenRouter's "varies per request"
    assert per_million("free") is None and per_million(None) is None and per_million(True) is None


def test_one_pinned_endpoint_per_provider_with_price_and_claims() -> None:
    eps = {e.name: e for e in _endpoints()}
    assert list(eps) == ["verifier", "cheaphost-bf16", "honestquant-int4", "mystery"]
    first = eps["verifier"]
    assert first.extra_body == {"provider": {"only": ["verifier"], "allow_fallbacks": False}}
    assert first.base_url == "http://127.0.0.1:1/api/v1" and first.model == MODEL
    assert first.api_key_env == "OPENROUTER_API_KEY"
    assert first.price is not None and first.price.model_dump() == pytest.approx(
        {"input": 0.6, "output": 2.5, "cached_input": 0.15})
    assert first.claims.quantization == "bf16" and first.claims.context_length == 1024
    assert first.claims.implicit_caching is True and "response_format" in (first.claims.supported_parameters or [])
    cheap = eps["cheaphost-bf16"]
    assert cheap.extra_body["provider"]["only"] == ["cheaphost/bf16"]  # pinned by tag, not by display name
    assert cheap.price is not None and cheap.price.cached_input is None and cheap.claims.implicit_caching is False
    assert eps["honestquant-int4"].claims.implicit_caching is None  # not listed: not stated


def test_provider_without_quantization_label_or_prices_states_only_what_is_listed() -> None:
    mystery = {e.name: e for e in _endpoints()}["mystery"]
    assert mystery.claims.quantization is None and mystery.claims.supported_parameters is None
    assert mystery.price is None  # no completion price: a half price would mislead the cost figures
    assert "no quantization label" in mystery.notes and any("price left out" in n for n in mystery.notes)


def test_unknown_label_and_odd_types_are_dropped_not_guessed() -> None:
    text = ('{"data": {"id": "a/b", "endpoints": [{"provider_name": "A", "tag": "a", "quantization": "unknown", '
            '"context_length": "lots", "pricing": {"prompt": "x", "completion": "0.000001"}, '
            '"supported_parameters": "tools", "supports_implicit_caching": "yes"}]}}')
    (e,) = to_endpoints(parse_listing(text, "t"), "a/b", "http://x")
    assert e.claims.model_dump(exclude_none=True) == {}
    assert e.price is None and "no quantization label" in e.notes


def test_reference_is_the_first_party_provider_or_the_named_one() -> None:
    eps = _endpoints()
    assert pick_reference(eps, MODEL, None) == "verifier"
    assert pick_reference(eps, MODEL, "CheapHost") == "cheaphost-bf16"
    assert pick_reference(eps, MODEL, "honestquant/int4") == "honestquant-int4"
    with pytest.raises(ListingError, match="--reference nobody: no such provider"):
        pick_reference(eps, MODEL, "nobody")
    with pytest.raises(ListingError, match="no first-party provider for 'other'.*--reference NAME"):
        pick_reference(eps, "other/model", None)


def test_not_a_listing_names_the_field() -> None:
    with pytest.raises(ListingError, match=r"^f.json: not an OpenRouter endpoints listing \(field data: "):
        parse_listing('{"endpoints": []}', "f.json")
    with pytest.raises(ListingError, match="the listing has no endpoints"):
        to_endpoints(parse_listing('{"data": {"id": "a/b", "endpoints": []}}', "t"), "a/b", "http://x")
    with pytest.raises(ListingError, match=r"data.endpoints\[0\]: neither tag nor provider_name"):
        to_endpoints(parse_listing('{"data": {"endpoints": [{"quantization": "fp8"}]}}', "t"), "a/b", "http://x")
