"""Disclosure cards: what was measured for one endpoint, against which reference, on which suite versions.

A provider can publish ``disclosure-<endpoint>.json`` next to its model page, so it must stand alone: it names
the suites by content hash, the reference, the times and the verifier version, and carries no secret (only
the *name* of the key's env var; credentials in URLs are redacted).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from verifier.history.gate import GateResult
from verifier.http.redaction import public_url
from verifier.records import Interval, SuiteManifest
from verifier.run.summary import ClaimCheck, EndpointInfo, RunSummary, Verdict

__all__ = ["DisclosureCard", "build_cards", "fingerprint_text", "safe_filename", "write_cards"]

def safe_filename(name: str) -> str:
    """An endpoint name as a file-name part: anything but [A-Za-z0-9._-] becomes '_'."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip("._") or "endpoint"
    return cleaned[:100]


class EndpointPublic(BaseModel):
    name: str
    base_url: str
    model: str | None = None
    api_key_env: str | None = None
    builtin: dict[str, Any] | None = None

    @classmethod
    def of(cls, info: EndpointInfo) -> EndpointPublic:
        return cls(name=info.name, base_url=public_url(info.base_url), model=info.model,
                   api_key_env=info.api_key_env, builtin=info.builtin)


class SuiteResultCard(BaseModel):
    suite: str
    metrics: dict[str, Interval] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class DisclosureCard(BaseModel):
    """The published card. ``measured_against`` is the reference endpoint every comparison used."""

    schema_version: str = "1.1"  # 1.1: ``verdict`` (additive)
    endpoint: EndpointPublic
    is_reference: bool
    measured_against: EndpointPublic | None
    run_id: str
    started_at: str
    finished_at: str | None
    verifier_version: str
    suites: list[SuiteManifest]
    results: list[SuiteResultCard]
    fingerprint: Any = None  # the closest quantization profile, as the fingerprinting code reported it
    gate_status: str | None = None
    gate_policy: str | None = None
    not_measured: list[str] = Field(default_factory=list)
    verdict: str | None = None  # consistent / differs / inconclusive (docs/verdict.md); None for the reference
    verdict_headline: str | None = None
    #: what the provider states about this endpoint, each claim against what the run measured (additive)
    claims: list[ClaimCheck] = Field(default_factory=list)


def _fingerprint(summary: RunSummary, endpoint: str) -> Any:
    """The run-level fingerprint if the runner set one, else what logprob scoring left in its result's extra."""
    if endpoint in summary.fingerprints:
        return summary.fingerprints[endpoint]
    found = {r.suite: r.extra["fingerprint"] for r in summary.results
             if r.endpoint == endpoint and isinstance(r.extra.get("fingerprint"), dict)}
    return found or None


def fingerprint_text(fp: Any) -> str:
    """A fingerprint as one readable line: the verdict and distance, not the raw ranking table."""
    if fp is None:
        return "not measured"
    if isinstance(fp, dict) and "verdict" in fp:
        dist = fp.get("distance")
        extra = f" (distance {dist:.3g})" if isinstance(dist, int | float) else ""
        return f"closest profile: {fp['verdict']}{extra}" + (f"; {fp['reason']}" if fp.get("reason") else "")
    if isinstance(fp, dict) and all(isinstance(v, dict) for v in fp.values()):
        return "; ".join(f"{suite}: {fingerprint_text(v)}" for suite, v in fp.items())
    return str(fp)


def build_cards(summary: RunSummary, gate: GateResult | None, headline: list[str],
                verdicts: dict[str, Verdict] | None = None) -> list[DisclosureCard]:
    """One card per endpoint; ``headline`` metrics absent from every suite are listed as not measured."""
    verdicts = summary.verdicts if verdicts is None else verdicts
    ref = next((e for e in summary.endpoints if e.name == summary.reference), None)
    cards = []
    for ep in summary.endpoints:
        mine = [r for r in summary.results if r.endpoint == ep.name]
        suite_names = {r.suite for r in mine}
        present = {m for r in mine for m, iv in r.metrics.items() if iv.value is not None}
        cards.append(
            DisclosureCard(
                endpoint=EndpointPublic.of(ep),
                is_reference=ep.name == summary.reference,
                measured_against=EndpointPublic.of(ref) if ref is not None else None,
                run_id=summary.run_id,
                started_at=summary.started_at,
                finished_at=summary.finished_at,
                verifier_version=summary.verifier_version,
                suites=[s for s in summary.suites if s.name in suite_names],
                results=[SuiteResultCard(suite=r.suite, metrics=r.metrics, notes=r.notes) for r in mine],
                fingerprint=_fingerprint(summary, ep.name),
                gate_status=gate.endpoint_status(ep.name) if gate is not None else None,
                gate_policy=gate.policy if gate is not None else None,
                not_measured=[m for m in headline if m not in present and not (m == "pass^k" and any(
                    p.startswith("pass^") for p in present))],
                verdict=verdicts[ep.name].status if ep.name in verdicts else None,
                verdict_headline=verdicts[ep.name].headline if ep.name in verdicts else None,
                claims=summary.claims.get(ep.name, []),
            )
        )
    return cards


def write_cards(run_dir: Path, cards: list[DisclosureCard]) -> list[Path]:
    """Write ``disclosure-<endpoint>.json`` for every card (file names made safe; collisions get a suffix)."""
    paths: list[Path] = []
    used: set[str] = set()
    for card in cards:
        stem = safe_filename(card.endpoint.name)
        name, k = stem, 2
        while name in used:
            name, k = f"{stem}-{k}", k + 1
        used.add(name)
        path = Path(run_dir) / f"disclosure-{name}.json"
        path.write_text(card.model_dump_json(indent=2), encoding="utf-8")
        paths.append(path)
    return paths
