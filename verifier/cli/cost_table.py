"""The ``--dry-run`` output: a table per endpoint and suite, then where each row's token figures came from."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from verifier.run.dry_run import CostPlan


def _usd(x: float | None) -> str:
    return "no price" if x is None else f"${x:.4f}"


def cost_plan_tables(plan: CostPlan) -> list[Table]:
    """A table per endpoint, a row per suite: requests (worst case), expected prompt and completion tokens,
    expected USD and its upper bound."""
    tables = []
    for name, ep in plan.endpoints.items():
        table = Table(title=f"endpoint {escape(name)}" + ("" if ep.priced else " (no price)"), title_justify="left")
        table.add_column("suite", overflow="fold")
        for col in ("requests", "prompt tokens", "completion tokens", "USD", "USD high"):
            table.add_column(col, justify="right")
        for r in (r for r in plan.rows if r.endpoint == name):
            expected = "" if r.expected_requests == r.requests else f" (expected {r.expected_requests:.0f})"
            table.add_row(escape(r.suite), f"{r.requests}{expected}", f"{r.prompt_tokens:,.0f}",
                          f"{r.completion_tokens:,.0f}", _usd(r.usd), _usd(r.usd_high))
        table.add_row("total", str(ep.requests), "", "", _usd(ep.usd if ep.priced else None),
                      _usd(ep.usd_high if ep.priced else None), end_section=True)
        tables.append(table)
    return tables


def source_lines(plan: CostPlan) -> list[str]:
    """One line per endpoint and suite: how its prompt and completion tokens were obtained (plain text)."""
    return [f"{r.endpoint} / {r.suite}: prompt tokens from {r.prompt_source}; completion tokens from "
            f"{r.completion_source}" for r in plan.rows]
