"""``verifier endpoints import openrouter AUTHOR/SLUG --out endpoints.toml``: every provider of a model, one command.

The listing is read from OpenRouter (``--api-base``, default https://openrouter.ai) or from a saved copy
(``--from FILE``); :mod:`verifier.http.openrouter_listing` turns it into pinned endpoints with prices and claims, and
this module writes them as an endpoints TOML (``tomlkit``, so strings are escaped by the library) that
``verifier run --config`` reads as is. Exit 2 with one line on any bad input.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import tomlkit
import typer

from verifier.http.openrouter_listing import (
    API_KEY_ENV,
    DEFAULT_API_BASE,
    ImportedEndpoint,
    ListingError,
    fetch_listing,
    parse_listing,
    pick_reference,
    to_endpoints,
)

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Endpoints files: import a model's providers.")

SOURCES = ("openrouter",)


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(2)


def _inline(values: dict[str, Any]) -> Any:
    table = tomlkit.inline_table()
    for k, v in values.items():
        table[k] = _inline(v) if isinstance(v, dict) else v
    return table


def render_toml(endpoints: list[ImportedEndpoint], reference: str, model: str, origin: str) -> str:
    """The endpoints file: reference first, one ``[endpoints.NAME]`` table per provider, notes as comments."""
    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"Providers of {model}, imported from {origin} on {dt.date.today().isoformat()}."))
    doc.add(tomlkit.comment("Each endpoint is pinned to one provider (no fallback); claims are what the listing "
                            "states, and `verifier run` checks each one."))
    doc["reference"] = reference
    tables = tomlkit.table(is_super_table=True)
    for e in sorted(endpoints, key=lambda x: x.name != reference):
        t = tomlkit.table()
        for note in e.notes:
            t.add(tomlkit.comment(f"{e.provider}: {note}"))
        t["base_url"] = e.base_url
        t["model"] = e.model
        t["api_key_env"] = e.api_key_env
        t["extra_body"] = _inline(e.extra_body)
        if e.price is not None:
            t["price"] = _inline(e.price.model_dump(exclude_none=True))
        claims = e.claims.model_dump(exclude_none=True)
        if claims:
            t["claims"] = _inline(claims)
        tables[e.name] = t
    doc["endpoints"] = tables
    return tomlkit.dumps(doc)


@app.command("import")
def import_(
    source: str = typer.Argument(..., help="Where the listing comes from: openrouter."),
    model: str = typer.Argument(..., help="The model as AUTHOR/SLUG, e.g. deepseek/deepseek-chat-v3.1."),
    out: Path = typer.Option(..., "--out", help="The endpoints TOML to write (must not exist)."),
    from_file: Path | None = typer.Option(None, "--from", help="A saved JSON of the listing instead of fetching it."),
    api_base: str = typer.Option(DEFAULT_API_BASE, "--api-base", help="OpenRouter's address (the listing and the "
                                                                       "endpoints' base_url)."),
    reference: str | None = typer.Option(None, "--reference", help="The reference provider (default: the "
                                                                   "first-party one, matching the model's author)."),
) -> None:
    """Write one pinned endpoint per provider of MODEL, with the listing's prices and claims."""
    if source not in SOURCES:
        _fail(f"unknown source '{source}' (known: {', '.join(SOURCES)})")
    if out.exists():
        _fail(f"--out {out}: already exists; choose another file")
    try:
        if from_file is not None:
            try:
                text = from_file.read_bytes()
            except OSError as err:
                _fail(f"--from {from_file}: cannot read ({err.strerror or err})")
            listing = parse_listing(text, f"--from {from_file}")
            origin = f"{from_file.name} (a saved OpenRouter listing)"
        else:
            listing = fetch_listing(model, api_base, api_key=os.environ.get(API_KEY_ENV) or None)
            origin = f"{api_base.rstrip('/')}/api/v1/models/{model}/endpoints"
        endpoints = to_endpoints(listing, model, api_base)
        ref = pick_reference(endpoints, model, reference)
    except ListingError as err:
        _fail(str(err))
    try:
        out.write_text(render_toml(endpoints, ref, model, origin), encoding="utf-8")
    except OSError as err:
        _fail(f"--out {out}: cannot write ({err.strerror or err})")
    print(f"wrote {out}: {len(endpoints)} endpoint(s), reference '{ref}'")
    for e in endpoints:
        stated = ", ".join(f"{k}={v}" for k, v in e.claims.model_dump(exclude_none=True).items()
                           if k != "supported_parameters")
        print(f"  {e.name}: pinned to {e.tag}" + (f"; states {stated}" if stated else "")
              + (f"; {'; '.join(e.notes)}" if e.notes else ""))
