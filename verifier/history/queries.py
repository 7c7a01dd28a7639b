"""Reading the history: the same frame and typed points from a SQLite file or a PostgreSQL server.

Every reader (``verifier history``, drift, gate, the report's history section, a dashboard) goes through
``load_frame`` / ``load_points``, so the backend is invisible past this module. The column order is the
``MetricPoint`` field order and the row order is total (started_at, run, endpoint, suite, metric, basis), so
both backends give identical frames for the same rows (``tests/history/test_postgres.py`` checks it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from verifier.history.engine import connect_for_read
from verifier.history.location import DbArg, resolve_db
from verifier.history.model import CostPoint, HistoryError, MetricPoint, RunEntry, SuiteCostMeans
from verifier.history.schema import costs, metrics, runs

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["cost_means", "load_costs", "load_frame", "load_points", "load_runs"]

_COLUMNS = [metrics.c[name] for name in MetricPoint.model_fields]
_ORDER = [metrics.c.started_at, metrics.c.run_id, metrics.c.endpoint, metrics.c.suite, metrics.c.metric,
          metrics.c.basis]


def load_frame(
    db_path: DbArg = None,
    *,
    endpoint: str | None = None,
    metric: str | None = None,
    suite: str | None = None,
    basis: str | None = "value",
    endpoints: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The history as a pandas DataFrame, oldest first; filters are exact matches, ``None`` means all.

    ``endpoints`` keeps only rows of those endpoints (drift reads just the run's own series, not a whole shared
    history).
    """
    loc = resolve_db(db_path)
    if not loc.exists():
        raise HistoryError(f"{loc.display}: no history database here (run `verifier run` or "
                           f"`verifier history index` first)")
    stmt = select(*_COLUMNS)
    for col, val in (("endpoint", endpoint), ("metric", metric), ("suite", suite), ("basis", basis)):
        if val is not None:
            stmt = stmt.where(metrics.c[col] == val)
    if endpoints is not None:
        stmt = stmt.where(metrics.c.endpoint.in_(list(endpoints)))
    stmt = stmt.order_by(*_ORDER)
    import pandas as pd  # here, not at import: pandas costs ~0.2 s and a run that only indexes never needs it

    with connect_for_read(loc) as (conn, version):
        rows = conn.execute(stmt).all() if version > 0 else []  # version 0: no tables yet, an empty history
    df = pd.DataFrame.from_records(rows, columns=[c.name for c in _COLUMNS])
    # one dtype per column whatever the backend returned (and also for an empty result)
    for name in ("value", "ci_low", "ci_high", "p_value"):
        df[name] = pd.to_numeric(df[name], errors="coerce").astype("float64")
    df["n"] = df["n"].astype("int64")
    df["is_reference"] = df["is_reference"].astype(bool)
    return df


def load_points(db_path: DbArg = None, **filters: str | Sequence[str] | None) -> list[MetricPoint]:
    """Typed rows for code that crosses module boundaries (drift, report, dashboard), at full float precision.

    Why no JSON round trip: ``DataFrame.to_json`` writes 10 significant digits by default, which turned a KL of
    6.7e-13 into 0 (the dashboard showed "0 [3.9e-16, 0]", lower above upper) and fed drift the rounded values.
    Each cell goes from its numpy scalar to the Python value (NaN -> None) unchanged.
    """
    df = load_frame(db_path, **filters)  # type: ignore[arg-type]
    return [MetricPoint.model_validate({k: _plain(v) for k, v in row.items()})
            for row in df.to_dict(orient="records")]


def _plain(value: Any) -> Any:
    """A numpy scalar as its Python value (float64 -> float bit for bit), a missing float (NaN) as None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def load_runs(db_path: DbArg = None) -> list[RunEntry]:
    """Every indexed run, oldest first, on either backend (the dashboard's links to run folders)."""
    loc = resolve_db(db_path)
    if not loc.exists():
        raise HistoryError(f"{loc.display}: no history database here (run `verifier run` or "
                           f"`verifier history index` first)")
    stmt = select(runs.c.run_id, runs.c.started_at, runs.c.finished_at, runs.c.run_dir).order_by(
        runs.c.started_at, runs.c.run_id)
    with connect_for_read(loc) as (conn, version):
        rows = conn.execute(stmt).all() if version > 0 else []
    return [RunEntry(run_id=r.run_id, started_at=r.started_at, finished_at=r.finished_at, run_dir=r.run_dir)
            for r in rows]


def load_costs(db_path: DbArg = None) -> list[CostPoint]:
    """Cost per run and endpoint (summed over the run's suites), oldest first: the dashboard's cost table."""
    loc = resolve_db(db_path)
    if not loc.exists():
        return []
    with connect_for_read(loc) as (conn, version):
        if version < 3:
            return []  # indexed before costs were kept
        rows = conn.execute(select(costs).order_by(costs.c.started_at, costs.c.run_id, costs.c.endpoint)).all()
    out: dict[tuple[str, str], CostPoint] = {}
    for r in rows:
        p = out.setdefault((r.run_id, r.endpoint), CostPoint(run_id=r.run_id, started_at=r.started_at,
                                                             endpoint=r.endpoint, usd=None))
        p.requests += r.requests
        p.with_usage += r.with_usage
        p.prompt_tokens += r.prompt_tokens
        p.completion_tokens += r.completion_tokens
        p.cached_tokens += r.cached_tokens
        if r.usd is not None:
            p.usd = (p.usd or 0.0) + r.usd
    return list(out.values())


def cost_means(db_path: DbArg, suite_hash: str, endpoint: str) -> SuiteCostMeans | None:
    """Mean prompt and completion tokens per request of this suite (by content hash) on this endpoint name, over
    every indexed run; None when no run reported usage for it (``--dry-run`` then uses its stated defaults)."""
    loc = resolve_db(db_path)
    if not loc.exists():
        return None
    stmt = select(costs.c.run_id, costs.c.with_usage, costs.c.prompt_tokens, costs.c.completion_tokens).where(
        costs.c.suite_hash == suite_hash, costs.c.endpoint == endpoint)
    with connect_for_read(loc) as (conn, version):
        rows = conn.execute(stmt).all() if version >= 3 else []
    n = sum(r.with_usage for r in rows)
    if not n:
        return None
    return SuiteCostMeans(runs=len({r.run_id for r in rows}), requests=n,
                          prompt_tokens=sum(r.prompt_tokens for r in rows) / n,
                          completion_tokens=sum(r.completion_tokens for r in rows) / n)
