"""Run history: every run's metrics indexed into one database, a SQLite file or a shared PostgreSQL server.

Why a database: nightly runs form a time series per (endpoint, suite, metric). The default is a single SQLite
file that needs no server and can be cached between CI jobs; a team whose nightly jobs run on several machines
points ``--db`` / ``$VERIFIER_DB`` at ``postgresql://user@host:port/dbname`` instead, and every job writes into
one history. Both hold the same tables (``schema``, SQLAlchemy Core), created and migrated by the tool, with the
version recorded in the database (``schema_info``). The run folder stays the source of truth; the database is an
index that ``index_run`` can rebuild at any time (re-indexing a run replaces its rows, so it is idempotent, also
when two jobs index at once: ``indexing``).

Default location: ``$VERIFIER_DB`` (a path or a URL) if set, else ``$XDG_DATA_HOME/verifier/history.sqlite``,
else ``~/.local/share/verifier/history.sqlite``.

Modules: ``location`` (path or URL, credential-free display), ``schema`` (tables, migrations), ``engine``
(connections, transactions, errors), ``indexing`` (writes), ``queries`` (reads), ``model`` (typed records).
Every public function takes ``db`` as ``None`` (the default), a path, a URL string or a ``HistoryLocation``.
Callers that may not touch a database (a run with ``--no-history``, its report) hold the package, not its names
(``from verifier import history as history_store``), so SQLAlchemy is imported only when a database is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from verifier.history.model import CostPoint, HistoryError, MetricPoint, RunEntry, SuiteCostMeans

if TYPE_CHECKING:
    from verifier.history.indexing import index_run, index_summary, load_summary
    from verifier.history.location import (
        DbArg,
        HistoryLocation,
        default_db_path,
        default_location,
        describe_db,
        history_exists,
        redact_db_text,
        resolve_db,
    )
    from verifier.history.queries import cost_means, load_costs, load_frame, load_points, load_runs
    from verifier.history.schema import SCHEMA_VERSION

#: public name -> the module that defines it, imported on first use (PEP 562): every one of them needs
#: SQLAlchemy, whose import costs a few hundred ms that ``verifier run --no-history`` and its report never use.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("index_run", "index_summary", "load_summary"), "indexing"),
    **dict.fromkeys(("DbArg", "HistoryLocation", "default_db_path", "default_location", "describe_db",
                     "history_exists", "redact_db_text", "resolve_db"), "location"),
    **dict.fromkeys(("cost_means", "load_costs", "load_frame", "load_points", "load_runs"), "queries"),
    "SCHEMA_VERSION": "schema",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


__all__ = [
    "SCHEMA_VERSION",
    "CostPoint",
    "SuiteCostMeans",
    "cost_means",
    "load_costs",
    "DbArg",
    "HistoryError",
    "HistoryLocation",
    "MetricPoint",
    "RunEntry",
    "default_db_path",
    "default_location",
    "describe_db",
    "history_exists",
    "index_run",
    "index_summary",
    "load_frame",
    "load_points",
    "load_runs",
    "load_summary",
    "redact_db_text",
    "resolve_db",
]
