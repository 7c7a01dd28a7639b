"""What a run cost, from the usage each provider reported: ``summary.json``'s ``cost`` and ``stopped``.

Why from the records and not from the live ledger: a resumed or merged run is costed over everything on disk by
the same code, and the figures can be recomputed from ``records.jsonl`` by anyone. The live ledger
(:mod:`verifier.http.spend`) only decides what may still be sent; its settled amounts are kept per record
(``charged_usd``) and summed here beside the usage-priced cost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from verifier.http.spend import Cap, EndpointLedger, usd
from verifier.records import ExchangeRecord, Price, Usage
from verifier.run.summary import EndpointCost, EndpointInfo, StopInfo, TokenCost

_EXAMPLES = 10
#: ``verifier run --dry-run --out DIR`` writes its plan here; a run in the same folder sets its cost beside it
PLAN_NAME = "plan.json"


def _add(target: TokenCost, usage: Usage) -> bool:
    """Add one reported usage to ``target``; False when the usage holds no token count."""
    if usage.prompt_tokens is None and usage.completion_tokens is None:
        return False
    target.with_usage += 1
    target.prompt_tokens += usage.prompt_tokens or 0
    target.completion_tokens += usage.completion_tokens or 0
    target.cached_tokens += min(usage.cached_tokens or 0, usage.prompt_tokens or 0)
    return True


def _priced(target: TokenCost, price: Price | None) -> None:
    """USD of the summed tokens: the formula is linear, so pricing the sums equals summing the prices, and the
    figure does not depend on the order records were read in (a merged run equals the whole run, bit for bit)."""
    if price is not None:
        target.usd = usd(Usage(prompt_tokens=target.prompt_tokens, completion_tokens=target.completion_tokens,
                               cached_tokens=target.cached_tokens), price) or 0.0


def run_cost(records: Iterable[ExchangeRecord], endpoints: list[EndpointInfo]) -> dict[str, EndpointCost]:
    """Per endpoint (and per suite inside it): requests, reported tokens, USD at the endpoint's price.

    Retried attempts count where their usage was reported (``retried_usage``); a 2xx reply without usage is
    counted and named, never guessed. USD is exact arithmetic on the reported integers (no rounding here).
    """
    out = {e.name: EndpointCost(price=e.price) for e in endpoints}
    for r in records:
        cost = out.get(r.endpoint)
        if cost is None:
            continue
        suite = cost.suites.setdefault(r.suite, TokenCost())
        cost.requests += 1
        suite.requests += 1
        if r.charged_usd is not None:
            cost.charged_usd = (cost.charged_usd or 0.0) + r.charged_usd
        for extra in r.retried_usage:
            if _add(cost, extra):
                _add(suite, extra)
                cost.with_usage -= 1  # a retried attempt is not another request: only its tokens count
                suite.with_usage -= 1
                cost.retried_billed += 1
        if _add(cost, r.usage):
            _add(suite, r.usage)
        elif r.ok:
            cost.without_usage += 1
            cost.without_usage_examples.append(f"{r.suite}/{r.case_id}")
    for c in out.values():  # the same few, whatever order the records arrived in (a merged run equals a whole one)
        c.without_usage_examples = sorted(set(c.without_usage_examples))[:_EXAMPLES]
        _priced(c, c.price)
        for part in c.suites.values():
            _priced(part, c.price)
    return {name: c for name, c in out.items() if c.requests}


def with_plan(cost: dict[str, EndpointCost], plan_path: Path) -> dict[str, EndpointCost]:
    """Each endpoint's planned USD (``plan_usd``, ``plan_usd_high``) from a dry run's ``plan.json`` in the run folder,
    so the report can say "$0.41 of a $2.10 plan"; the cost unchanged when there is none (or it cannot be read)."""
    try:
        plan = json.loads(plan_path.read_text(encoding="utf-8"))
        planned = plan["endpoints"]
    except (OSError, ValueError, KeyError, TypeError):
        return cost
    for name, c in cost.items():
        entry = planned.get(name) if isinstance(planned, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("usd"), (int, float)):
            c.plan_usd = float(entry["usd"])
            c.plan_usd_high = float(entry["usd_high"]) if isinstance(entry.get("usd_high"), (int, float)) else None
    return cost


def budget_stop(ledgers: dict[str, EndpointLedger], refused_not_recorded: int) -> StopInfo | None:
    """``stopped`` for the summary when a budget refused any request; None when every request could be sent."""
    refused = {name: led.refused for name, led in ledgers.items() if led.refused}
    if not refused:
        return None
    caps: dict[int, Cap] = {}
    for led in ledgers.values():
        for c in led.caps:
            caps[id(c)] = c
    return StopInfo(
        reason="budget", refused=refused_not_recorded,
        caps=[{"cap": c.label, "limit_usd": c.limit_usd, "committed_usd": c.committed_usd, "exhausted": c.exhausted}
              for c in caps.values()],
        endpoints={name: {"refused": led.refused, "spent_usd": led.spent_usd,
                          "stopped": bool(led.stopped_caps())} for name, led in ledgers.items()})
