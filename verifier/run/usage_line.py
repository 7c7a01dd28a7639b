"""What a candidate's verdict cost and rested on, in one line beside it: cases used, dollars, a budget stop.

Why one module for the CLI and the report: a verdict read without its sample size and its price invites the wrong
reading ("consistent" after 50 cases of a 2,000-case plan reads like the full plan; a budget stop reads like a
finished run), so both places print the same words, built from ``summary.json`` alone (``sequential``, ``cost``,
``stopped``) and the verdict's evidence, e.g. ``settled after 312 of 2,000 cases, $0.41 of a $2.10 plan``.
"""

from __future__ import annotations

from pydantic import BaseModel

from verifier.run.summary import RunSummary, Verdict
from verifier.run.verdict_policy import HEADLINE_METRICS


class VerdictUsage(BaseModel):
    """The pieces of the line; ``text`` joins them. Each is None when the run has nothing to say about it."""

    cases: str | None = None  # "settled after 312 of 2,000 cases" (per suite when several)
    cost: str | None = None  # "$0.41 of a $2.10 plan (624 requests)"
    budget: str | None = None  # "stopped by budget after 40 requests (80 not sent)"
    limit: str | None = None  # a headline outside the sequential set left unsettled by a sequential run

    @property
    def text(self) -> str:
        return ", ".join(p for p in (self.cases, self.cost, self.budget) if p)


def usd(x: float) -> str:
    """Dollars as the report's cost table writes them (4 decimals: a loopback run costs fractions of a cent)."""
    return f"${x:.4f}" if x < 100 else f"${x:,.2f}"


def _cases(summary: RunSummary, endpoint: str) -> str | None:
    mine = [q for q in summary.sequential if q.endpoint == endpoint]
    if not mine:
        return None
    words = []
    for q in mine:
        said = (f"settled after {q.cases:,} of {q.of:,} cases" if q.settled
                else f"open after {q.cases:,} of {q.of:,} cases")
        words.append(f"{q.suite}: {said}" if len(mine) > 1 else said)
    return "; ".join(words)


def _cost(summary: RunSummary, endpoint: str) -> str | None:
    c = summary.cost.get(endpoint)
    if c is None:
        return None
    if c.usd is None:
        return f"cost not priced ({c.requests:,} requests; no price set for this endpoint)"
    plan = f" of a {usd(c.plan_usd)} plan" if c.plan_usd is not None else ""
    return f"{usd(c.usd)}{plan} ({c.requests:,} requests)"


def _budget(summary: RunSummary, endpoint: str) -> str | None:
    st = summary.stopped
    if st is None or st.reason != "budget":
        return None
    mine = st.endpoints.get(endpoint) or {}
    refused = int(mine.get("refused") or 0)
    if not refused:
        return None
    c = summary.cost.get(endpoint)  # absent when the budget refused its very first request
    return (f"stopped by budget after {0 if c is None else c.requests:,} requests ({refused:,} not sent; the "
            f"verdict rests on what was measured)")


def _limit(summary: RunSummary, endpoint: str, verdict: Verdict | None) -> str | None:
    """A headline of a sequentially run suite that the sequential test did not judge (a fixed-n figure read after
    the adaptive stop): when it is unsettled, say so, so that nobody reads the candidate's stop as settling it."""
    if verdict is None or not any(q.endpoint == endpoint for q in summary.sequential):
        return None
    suites = {q.suite for q in summary.sequential if q.endpoint == endpoint}
    unsettled = [e for e in verdict.evidence if e.suite in suites and e.test != "sequential (anytime-valid)"
                 and e.metric in HEADLINE_METRICS and e.status not in ("differs", "consistent")]
    if not unsettled:
        return None
    names = list(dict.fromkeys(HEADLINE_METRICS[e.metric] for e in unsettled))
    them, their = ("them", "their figures") if len(names) > 1 else ("it", "its figure")
    return (f"{' and '.join(names)} not settled: not in the sequential set, so the sequential stop does not settle "
            f"{them} ({their} on the cases sent {'are' if len(names) > 1 else 'is'} fixed-n, not anytime-valid)")


def verdict_usage(summary: RunSummary, endpoint: str, verdict: Verdict | None = None) -> VerdictUsage:
    """The line beside ``endpoint``'s verdict."""
    return VerdictUsage(cases=_cases(summary, endpoint), cost=_cost(summary, endpoint),
                        budget=_budget(summary, endpoint), limit=_limit(summary, endpoint, verdict))
