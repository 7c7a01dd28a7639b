"""A small SVG badge a provider can put on a model page, traceable to the run it summarises.

Why an SVG of its own instead of a screenshot of the report: a model page wants a few lines (the verdict, the
stated versus measured precision, the date, the suite's hash) in a file it can host, and a reader who doubts it
needs a way back to the evidence: the badge carries the sha256 of the disclosure card it was drawn from
(``disclosure-<endpoint>.json`` of the run folder), so anyone holding the card can check it is that card.
The SVG is self-contained (no script, no external font or image) and every text from data is XML-escaped.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from reports.disclosure import DisclosureCard

__all__ = ["BadgeLines", "badge_lines", "card_sha256", "render_badge"]

_COLOURS = {"consistent": "#2e7d32", "differs": "#c62828", "inconclusive": "#8d6e00", "reference": "#455a64"}
_PRECISION = ("quantization", "kv_cache", "decode_weights")
_CHAR_W = 6.6  # px per character at 11 px sans-serif: a generous estimate so text never overflows the box


class BadgeLines:
    """The badge's text, before drawing: tested on its own, escaped only when drawn."""

    def __init__(self, title: str, status: str, stated: str, measured: str, trace: str, contradicts: bool) -> None:
        self.title, self.status, self.stated, self.measured = title, status, stated, measured
        self.trace, self.contradicts = trace, contradicts

    def rows(self) -> list[str]:
        return [self.title, self.stated, self.measured, self.trace]


def card_sha256(path: Path) -> str:
    """sha256 of the card file's bytes: what the badge cites."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _measured_profile(card: DisclosureCard) -> str | None:
    fp = card.fingerprint
    if isinstance(fp, dict) and "verdict" in fp:
        return str(fp["verdict"])
    if isinstance(fp, dict):  # one per logprob suite
        found = [str(v["verdict"]) for v in fp.values() if isinstance(v, dict) and "verdict" in v]
        return found[0] if found else None
    return None


def badge_lines(card: DisclosureCard, card_hash: str) -> BadgeLines:
    """Verdict, stated vs measured precision, date, suite hash and the card's hash, as plain text lines."""
    status = card.verdict or ("reference" if card.is_reference else "not judged")
    checks = [c for c in card.claims if c.claim in _PRECISION]
    measured = _measured_profile(card) or "not measured"
    tally = ", ".join(f"{sum(c.status == s for c in checks)} {s}" for s in ("agrees", "contradicts", "not checked")
                      if any(c.status == s for c in checks))
    stated = " · ".join(f"{c.claim.replace('_', ' ')} {c.stated}" for c in checks) or "no precision stated"
    suites = ", ".join(f"{s.name} {s.content_hash[:12]}" for s in card.suites) or "no suite"
    date = (card.finished_at or card.started_at)[:10]
    against = f" vs {card.measured_against.name}" if card.measured_against and not card.is_reference else ""
    return BadgeLines(
        title=f"verifier · {card.endpoint.name}{against}: {status}",
        status=status,
        stated=f"stated: {stated}",
        measured=f"measured: behaves like {measured}" + (f" ({tally})" if tally else ""),
        trace=f"{date} · suite {suites} · card sha256 {card_hash[:16]}",
        contradicts=any(c.status == "contradicts" for c in card.claims),
    )


def render_badge(card: DisclosureCard, card_hash: str) -> str:
    """The SVG text. Width follows the longest line; the full card hash is in the title and a data attribute."""
    lines = badge_lines(card, card_hash)
    rows = lines.rows()
    width = int(max(len(r) for r in rows) * _CHAR_W) + 24
    height = 18 * len(rows) + 14
    colour = _COLOURS.get(lines.status, "#455a64")
    if lines.contradicts:  # a contradicted claim is the badge's news, whatever the verdict
        colour = _COLOURS["differs"]
    title = f"{lines.title}. {lines.stated}. {lines.measured}. Disclosure card sha256 {card_hash}"
    texts = []
    for i, row in enumerate(rows):
        weight = ' font-weight="bold"' if i == 0 else ""
        texts.append(f'<text x="12" y="{22 + 18 * i}"{weight}>{escape(row)}</text>')
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label={quoteattr(lines.title)} '
        f'data-card-sha256={quoteattr(card_hash)}>\n'
        f'<title>{escape(title)}</title>\n'
        f'<rect width="{width}" height="{height}" rx="6" fill="#ffffff" stroke={quoteattr(colour)} '
        f'stroke-width="2"/>\n'
        f'<rect width="6" height="{height}" rx="3" fill={quoteattr(colour)}/>\n'
        f'<g font-family="DejaVu Sans,Verdana,Geneva,sans-serif" font-size="11" fill="#1b1b1b">\n'
        + "\n".join(texts) +
        '\n</g>\n</svg>\n'
    )
