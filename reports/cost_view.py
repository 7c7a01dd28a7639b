"""The report's cost figures: a row of the verdict table and a table in the run details (``summary.cost``).

Why its own module: cost is read from ``summary.json`` alone (what the provider reported, priced), so it needs
nothing of the verdict or gate machinery in :mod:`reports.render`; the markup is the partial
``templates/cost.html.j2``. Every figure carries its denominator (requests, and those that reported usage).
"""

from __future__ import annotations

from pydantic import BaseModel

from verifier.run.summary import EndpointCost, RunSummary


class CostCell(BaseModel):
    """One endpoint's cost as shown: the USD (or "no price"), and what it rests on."""

    endpoint: str
    usd: str
    basis: str  # "n requests, k reported usage"
    tokens: str  # "prompt P (cached C), completion Q"
    without_usage: str | None = None  # a sentence naming replies that reported no usage
    price: str | None = None


class CostView(BaseModel):
    cells: dict[str, CostCell]
    total: str | None  # the run's USD over priced endpoints
    stopped: str | None  # one sentence when a budget stopped the run


def _usd(x: float | None) -> str:
    if x is None:
        return "no price"
    return f"${x:.4f}" if x < 100 else f"${x:,.2f}"


def _cell(name: str, c: EndpointCost) -> CostCell:
    without = None
    if c.without_usage:
        shown = ", ".join(c.without_usage_examples)
        more = "" if c.without_usage <= len(c.without_usage_examples) else ", ..."
        without = f"{c.without_usage} of {c.requests} replies reported no usage (not in the sums): {shown}{more}"
    price = None
    if c.price is not None:
        cached = c.price.cached_input if c.price.cached_input is not None else c.price.input
        price = f"${c.price.input:g} in / ${cached:g} cached / ${c.price.output:g} out per 1M tokens"
    retried = f"; {c.retried_billed} retried attempts billed" if c.retried_billed else ""
    shown = _usd(c.usd)
    if c.usd is not None and c.plan_usd is not None:
        shown += f" of a {_usd(c.plan_usd)} plan"
    return CostCell(endpoint=name, usd=shown, basis=f"{c.requests} requests, {c.with_usage} reported usage"
                    + retried, tokens=f"prompt {c.prompt_tokens:,} (cached {c.cached_tokens:,}), "
                    f"completion {c.completion_tokens:,}", without_usage=without, price=price)


def cost_view(summary: RunSummary) -> CostView | None:
    """None when the summary has no cost (an older run folder, or no exchange at all)."""
    if not summary.cost:
        return None
    priced = [c.usd for c in summary.cost.values() if c.usd is not None]
    stopped = None
    if summary.stopped is not None and summary.stopped.reason == "budget":
        caps = "; ".join(f"{c.get('cap')} ${c.get('limit_usd', 0):.4f}" for c in summary.stopped.caps
                         if c.get("exhausted"))
        stopped = (f"Stopped by budget ({caps or 'a cap'}): {summary.stopped.refused} requests were not sent; "
                   "the figures and verdicts rest on what was measured. Continue with verifier run --resume DIR "
                   "--budget USD.")
    return CostView(cells={n: _cell(n, c) for n, c in summary.cost.items()},
                    total=_usd(sum(priced)) if priced else None, stopped=stopped)
