"""What a run cost, from the usage each provider reported: ``summary.json``'s ``cost`` and ``stopped``.

Why from the records and not from the live ledger: a resumed or merged run is costed over everything on disk by
the same code, and the figures can be recomputed from ``records.jsonl`` by anyone. The live ledger
(:mod:`verifier.http.spend`) only decides what may still be sent; its settled amounts are kept per record
(``charged_usd``) and summed here beside the usage-priced cost.
"""

from __future__ import annotations

from collections.abc import Iterable

from verifier.http.spend import Cap, EndpointLedger, usd
from verifier.records import ExchangeRecord, Price, Usage
from verifier.run.summary import EndpointCost, EndpointInfo, StopInfo, TokenCost

_EXAMPLES = 10


def _add(target: TokenCost, usage: Usage, price: Price | None) -> bool:
    """Add one reported usage to ``target``; False when the usage holds no token count."""
    if usage.prompt_tokens is None and usage.completion_tokens is None:
        return False
    target.with_usage += 1
    target.prompt_tokens += usage.prompt_tokens or 0
    target.completion_tokens += usage.completion_tokens or 0
    target.cached_tokens += min(usage.cached_tokens or 0, usage.prompt_tokens or 0)
    if price is not None:
        target.usd = (target.usd or 0.0) + (usd(usage, price) or 0.0)
    return True


def run_cost(records: Iterable[ExchangeRecord], endpoints: list[EndpointInfo]) -> dict[str, EndpointCost]:
    """Per endpoint (and per suite inside it): requests, reported tokens, USD at the endpoint's price.

    Retried attempts count where their usage was reported (``retried_usage``); a 2xx reply without usage is
    counted and named, never guessed. USD is exact arithmetic on the reported integers (no rounding here).
    """
    prices = {e.name: e.price for e in endpoints}
    out = {e.name: EndpointCost(price=e.price, usd=0.0 if e.price else None) for e in endpoints}
    for r in records:
        cost = out.get(r.endpoint)
        if cost is None:
            continue
        price = prices[r.endpoint]
        suite = cost.suites.setdefault(r.suite, TokenCost(usd=0.0 if price else None))
        cost.requests += 1
        suite.requests += 1
        if r.charged_usd is not None:
            cost.charged_usd = (cost.charged_usd or 0.0) + r.charged_usd
        for extra in r.retried_usage:
            if _add(cost, extra, price):
                _add(suite, extra, price)
                cost.with_usage -= 1  # a retried attempt is not another request: only its tokens count
                suite.with_usage -= 1
                cost.retried_billed += 1
        if _add(cost, r.usage, price):
            _add(suite, r.usage, price)
        elif r.ok:
            cost.without_usage += 1
            if len(cost.without_usage_examples) < _EXAMPLES:
                cost.without_usage_examples.append(f"{r.suite}/{r.case_id}")
    return {name: c for name, c in out.items() if c.requests}


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
