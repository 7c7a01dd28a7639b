"""The typed records that leave the history package: one metric row, and the one error it raises."""

from __future__ import annotations

from pydantic import BaseModel

from verifier.run.summary import TokenCost

__all__ = ["CostPoint", "HistoryError", "MetricPoint", "SuiteCostMeans"]


class HistoryError(Exception):
    """A history database or run folder that cannot be read or written.

    The message is one line naming the file or the database (a server URL always with its credentials redacted),
    so a CLI can print it as is.
    """


class MetricPoint(BaseModel):
    """One row of the history: a metric of one endpoint on one suite in one run."""

    run_id: str
    started_at: str
    endpoint: str
    is_reference: bool
    suite: str
    suite_hash: str | None
    kind: str
    basis: str
    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    method: str | None = None
    p_value: float | None = None


class RunEntry(BaseModel):
    """One indexed run: where its folder was when it was indexed (the dashboard links each run's report)."""

    run_id: str
    started_at: str
    finished_at: str | None = None
    run_dir: str | None = None


class CostPoint(TokenCost):
    """What one endpoint cost in one run (every suite), as the provider reported it; ``usd`` None: no price. The
    token fields are the summary's own (:class:`~verifier.run.summary.TokenCost`), so history keeps what runs wrote."""

    run_id: str
    started_at: str
    endpoint: str


class SuiteCostMeans(BaseModel):
    """Mean tokens per request of one suite on one endpoint over past runs (``requests`` replies with usage)."""

    runs: int
    requests: int
    prompt_tokens: float
    completion_tokens: float
