"""One row of ``verifier run --dry-run``'s plan (a suite, or a claims probe, on one endpoint).

A module of its own so that the suites' pricing (:mod:`verifier.run.dry_run`) and the probes'
(:mod:`verifier.run.probe_plan`) build the same record without importing each other.
"""

from __future__ import annotations

from pydantic import BaseModel


class PlanRow(BaseModel):
    """One suite on one endpoint; token totals are expectations, ``usd_high`` the bound."""

    endpoint: str
    suite: str
    kind: str
    requests: int  # worst case: every planned request (repeats, variants, every agent step, probes)
    expected_requests: float
    prompt_tokens: float
    completion_tokens: float
    usd: float | None  # None: the endpoint has no price
    usd_high: float | None
    prompt_source: str
    completion_source: str
