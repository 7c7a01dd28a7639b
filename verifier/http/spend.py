"""What a request costs, and the ledger that keeps a run's spend under its budget.

Why beside the client: the budget must hold *while* requests are in flight at high concurrency, so the check has
to sit where a request is about to leave. Before each attempt the client reserves the request's worst case (a
bound on its prompt tokens plus its ``max_tokens``, priced); after the attempt it settles the reservation with
the usage the provider reported. A reservation that would pass a cap is refused and the endpoint (or, for the
run-wide ``--budget``, every endpoint) stops sending: the spend never exceeds the cap as long as the provider
bills no more than the bound (docs/cli.md "Cost and budget" states the bound).

Prices follow OpenAI's convention: ``prompt_tokens`` includes the cached ones, so
usd = ((prompt - cached) x input + cached x cached_input + completion x output) / 1e6.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verifier.records import Price, Usage

#: Prompt tokens are bounded by the request's UTF-8 bytes (a byte-level BPE token covers at least one byte) plus
#: this allowance for what a chat template adds around them (role markers, a default system text).
TEMPLATE_ALLOWANCE_TOKENS = 512
#: ``max_tokens`` assumed for a request that sets none (a reply's length is then bounded only by the server).
UNBOUNDED_MAX_TOKENS = 16384


def usd(usage: Usage, price: Price) -> float | None:
    """The cost of one reply's reported usage; None when the reply reported no token counts."""
    if usage.prompt_tokens is None and usage.completion_tokens is None:
        return None
    prompt = usage.prompt_tokens or 0
    cached = min(usage.cached_tokens or 0, prompt)
    completion = usage.completion_tokens or 0
    cached_price = price.input if price.cached_input is None else price.cached_input
    return ((prompt - cached) * price.input + cached * cached_price + completion * price.output) / 1e6


def uncached_usd(prompt_tokens: float, completion_tokens: float, price: Price) -> float:
    """Every prompt token uncached at the input price, the completion at the output price (a plan's figure)."""
    return (prompt_tokens * price.input + completion_tokens * price.output) / 1e6


def worst_case_usd(prompt_tokens: int, max_tokens: int, price: Price) -> float:
    """Every prompt token uncached at the input price, and a reply of ``max_tokens``."""
    return uncached_usd(prompt_tokens, max_tokens, price)


def request_max_tokens(body: dict) -> int:
    """The reply's token cap a request sets (``max_completion_tokens`` or ``max_tokens``), else the stated default."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return UNBOUNDED_MAX_TOKENS


def prompt_token_bound(payload: bytes) -> int:
    """An upper bound on the prompt tokens of a request whose body is ``payload`` (see the module docstring)."""
    return len(payload) + TEMPLATE_ALLOWANCE_TOKENS


@dataclass
class Cap:
    """One budget: the run's (``--budget``) or one endpoint's; ``committed`` = settled spend + open reservations."""

    label: str  # "--budget" or "endpoint 'NAME' budget"
    limit_usd: float
    committed_usd: float = 0.0
    exhausted: bool = False  # set at the first refusal: from then on nothing more is sent under this cap


@dataclass
class Reservation:
    amount: float
    caps: list[Cap]


@dataclass
class EndpointLedger:
    """One endpoint's price and the caps its requests count against (its own and the run's)."""

    endpoint: str
    price: Price
    caps: list[Cap] = field(default_factory=list)
    refused: int = 0
    spent_usd: float = 0.0  # settled (usage-priced, or the reservation where a reply brought no usage)
    over_reservation: int = 0  # replies that cost more than their reservation (a bound that did not hold)

    def reserve(self, amount: float) -> Reservation | None:
        """Hold ``amount`` against every cap, or None (and the caps marked exhausted) when one would be passed."""
        if any(c.exhausted or c.committed_usd + amount > c.limit_usd + 1e-12 for c in self.caps):
            for c in self.caps:
                if c.committed_usd + amount > c.limit_usd + 1e-12:
                    c.exhausted = True
            self.refused += 1
            return None
        for c in self.caps:
            c.committed_usd += amount
        return Reservation(amount, list(self.caps))

    def settle(self, reservation: Reservation, actual: float) -> None:
        """Replace the reservation by what the attempt really cost."""
        if actual > reservation.amount + 1e-12:
            self.over_reservation += 1
        for c in reservation.caps:
            c.committed_usd += actual - reservation.amount
        self.spent_usd += actual

    def stopped_caps(self) -> list[Cap]:
        return [c for c in self.caps if c.exhausted]


def settled_usd(attempt: dict, reserved: float, price: Price) -> float:
    """What one attempt is settled at: its reported usage priced; nothing for a definite error reply (an HTTP
    error status, not billed by OpenAI-compatible providers); the reservation when a reply may have been billed
    but said nothing (a 200 without usage, a timeout or a broken stream after the request left)."""
    raw = attempt.get("usage")
    if isinstance(raw, dict):
        cost = usd(Usage.model_validate(raw), price)
        if cost is not None:
            return cost
    status = attempt.get("status")
    if status is not None and status >= 300:
        return 0.0
    if attempt.get("error_class") == "connection" and status is None:
        return 0.0  # no connection: nothing reached the provider
    return reserved


def build_ledgers(prices: dict[str, Price | None], budgets: dict[str, float | None], run_budget: float | None,
                  already_spent: dict[str, float]) -> dict[str, EndpointLedger]:
    """Ledgers for every priced endpoint; ``already_spent`` (``--resume``) is counted against the caps first.

    Raises ValueError (one line) when a budget applies to an endpoint without a price: its spend is unknowable.
    """
    run_cap = Cap("--budget", run_budget) if run_budget is not None else None
    ledgers: dict[str, EndpointLedger] = {}
    for name, price in prices.items():
        own = budgets.get(name)
        if price is None:
            if own is not None:
                raise ValueError(f"endpoint '{name}': budget = {own:g} needs a price "
                                 "(price = { input = ..., output = ... }, USD per 1M tokens)")
            if run_cap is not None:
                raise ValueError(f"--budget {run_budget:g}: endpoint '{name}' has no price, so its spend cannot be "
                                 "counted (give it price = { input = ..., output = ... } in the endpoints TOML)")
            continue
        caps = [Cap(f"endpoint '{name}' budget", own)] if own is not None else []
        if run_cap is not None:
            caps.append(run_cap)
        ledger = EndpointLedger(name, price, caps)
        spent = already_spent.get(name, 0.0)
        for c in caps:
            c.committed_usd += spent
        ledger.spent_usd = spent
        ledgers[name] = ledger
    return ledgers
