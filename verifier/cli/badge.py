"""``verifier badge RUN --endpoint NAME --out badge.svg``: the endpoint's disclosure card drawn as a small SVG.

The badge is drawn from the card file the run folder already holds (``disclosure-<endpoint>.json``, written with
the report), and cites that file's sha256, so the badge can be traced to exactly that card and run. Exit 2 with
one line when the folder, the endpoint or its card is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import typer
from pydantic import ValidationError

from reports.badge import card_sha256, render_badge
from reports.disclosure import DisclosureCard


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(2)


def find_card(run_dir: Path, endpoint: str) -> tuple[Path, DisclosureCard]:
    """The card file of ``endpoint`` in ``run_dir`` (file names are made safe, so the name inside decides)."""
    names = []
    for path in sorted(run_dir.glob("disclosure-*.json")):
        try:
            card = DisclosureCard.model_validate_json(path.read_bytes())
        except (OSError, ValidationError) as e:
            _fail(f"{path}: not a disclosure card ({str(e).splitlines()[0]})")
        names.append(card.endpoint.name)
        if card.endpoint.name == endpoint:
            return path, card
    if not names:
        _fail(f"{run_dir}: no disclosure cards (a finished run writes them with its report; "
              f"re-render with: verifier report {run_dir})")
    _fail(f"--endpoint {endpoint}: no such endpoint in {run_dir} (cards for: {', '.join(names)})")


def badge(run_dir: Path = typer.Argument(..., help="A run folder."),
          endpoint: str = typer.Option(..., "--endpoint", help="The endpoint the badge is for."),
          out: Path = typer.Option(..., "--out", help="The SVG file to write.")) -> None:
    """Draw the endpoint's verdict, stated vs measured precision, date and suite hash as an SVG badge."""
    if not run_dir.is_dir():
        _fail(f"{run_dir}: not a run folder")
    path, card = find_card(run_dir, endpoint)
    digest = card_sha256(path)
    try:
        out.write_text(render_badge(card, digest), encoding="utf-8")
    except OSError as e:
        _fail(f"--out {out}: cannot write ({e.strerror or e})")
    print(f"wrote {out} (from {path.name}, sha256 {digest})")
