"""The history tables, declared once in SQLAlchemy Core for SQLite and PostgreSQL, and the tool's own migrations.

Versions (``schema_info.schema_version``; SQLite files also mirror it in ``PRAGMA user_version``):

1. ``runs`` and ``metrics`` (verifier up to the PostgreSQL work); the version lived only in SQLite's
   ``user_version``, which PostgreSQL has no equivalent of.
2. adds ``schema_info`` so the version is an ordinary row any backend (and any SQL client) can read.
3. adds ``costs``: per run, endpoint and suite, the tokens the provider reported and their USD (``--dry-run``
   estimates a suite's completion tokens from them; the dashboard charts cost per run).

Why not Alembic: one linear step so far, run inside the same locked transaction that checks the version; the
check-and-migrate below is a dozen lines and needs no migration scripts shipped beside the package. Should
the schema start branching, Alembic is the tool to move to.

Text columns use the "C" collation on PostgreSQL so that ``ORDER BY`` and comparisons are bytewise, as they are
in SQLite: the same history gives the same frame, row for row, on both.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    inspect,
    select,
    text,
)

from verifier.history.model import HistoryError

__all__ = ["SCHEMA_VERSION", "costs", "ensure_schema", "metadata", "metrics", "runs", "schema_info", "stored_version"]

#: Bumped on any change of the tables below, with a step in ``_MIGRATIONS``; a newer database is refused.
SCHEMA_VERSION = 3

#: Key of PostgreSQL's transaction-scoped advisory lock taken while creating or migrating the schema, so two
#: jobs starting together on an empty database do not both run CREATE TABLE ("verifier" in ASCII, as an int).
_PG_SCHEMA_LOCK = 0x7665726966696572

_Str = Text().with_variant(Text(collation="C"), "postgresql")

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("run_id", _Str, primary_key=True),  # the unique key that makes indexing a run twice a replacement
    Column("started_at", _Str, nullable=False),
    Column("finished_at", _Str),
    Column("verifier_version", _Str),
    Column("reference", _Str),
    Column("run_dir", _Str),
    Column("indexed_at", Double, nullable=False),
)

metrics = Table(
    "metrics",
    metadata,
    Column("run_id", _Str, ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("started_at", _Str, nullable=False),
    Column("endpoint", _Str, nullable=False),
    Column("is_reference", Boolean, nullable=False),
    Column("suite", _Str, nullable=False),
    Column("suite_hash", _Str),
    Column("kind", _Str, nullable=False),
    Column("basis", _Str, nullable=False),  # 'value' (the metric itself) or 'vs_reference' (candidate - reference)
    Column("metric", _Str, nullable=False),
    Column("value", Double),
    Column("ci_low", Double),
    Column("ci_high", Double),
    Column("n", Integer, nullable=False),
    Column("method", _Str),
    Column("p_value", Double),
    PrimaryKeyConstraint("run_id", "endpoint", "suite", "basis", "metric"),
)
Index("metrics_series", metrics.c.endpoint, metrics.c.suite, metrics.c.metric, metrics.c.basis, metrics.c.started_at)

costs = Table(
    "costs",
    metadata,
    Column("run_id", _Str, ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("started_at", _Str, nullable=False),
    Column("endpoint", _Str, nullable=False),
    Column("suite", _Str, nullable=False),
    Column("suite_hash", _Str),
    Column("requests", Integer, nullable=False),
    Column("with_usage", Integer, nullable=False),  # requests whose reply reported usage: the sums' denominator
    Column("prompt_tokens", Integer, nullable=False),
    Column("completion_tokens", Integer, nullable=False),
    Column("cached_tokens", Integer, nullable=False),
    Column("usd", Double),  # None: the endpoint had no price
    PrimaryKeyConstraint("run_id", "endpoint", "suite"),
)
Index("costs_by_suite", costs.c.suite_hash, costs.c.endpoint)

schema_info = Table(
    "schema_info",
    metadata,
    Column("name", _Str, primary_key=True),
    Column("value", _Str, nullable=False),
)


def stored_version(conn: Connection) -> int:
    """The schema version of the database behind ``conn``: 0 when it holds no history tables yet."""
    found = 0
    if conn.dialect.name == "sqlite":
        found = int(conn.exec_driver_sql("PRAGMA user_version").scalar() or 0)
    insp = inspect(conn)
    if insp.has_table("schema_info"):
        value = conn.execute(select(schema_info.c.value).where(schema_info.c.name == "schema_version")).scalar()
        found = max(found, int(value) if value is not None else 0)
    elif found == 0 and insp.has_table("runs"):
        found = 1  # a version-1 table set whose user_version was never written (not made by verifier itself)
    return found


def ensure_schema(conn: Connection, where: str) -> None:
    """Create or migrate the tables inside the caller's write transaction (which holds the database's lock).

    ``where`` names the database in the error for a newer schema. The caller starts the transaction so that on
    SQLite it is ``BEGIN IMMEDIATE`` (the file's write lock); here PostgreSQL additionally takes an advisory lock.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_SCHEMA_LOCK})
    version = stored_version(conn)
    check_version(version, where)
    if version == SCHEMA_VERSION:
        return
    if version == 0:
        metadata.create_all(conn)
    else:
        for step in range(version, SCHEMA_VERSION):
            _MIGRATIONS[step](conn)
    _record_version(conn)


def check_version(version: int, where: str) -> None:
    """Refuse a database written by a newer verifier rather than misread it."""
    if version > SCHEMA_VERSION:
        raise HistoryError(f"{where}: history schema version {version} is newer than this verifier's "
                           f"({SCHEMA_VERSION}); upgrade verifier")


def _record_version(conn: Connection) -> None:
    conn.execute(schema_info.delete().where(schema_info.c.name == "schema_version"))
    conn.execute(schema_info.insert().values(name="schema_version", value=str(SCHEMA_VERSION)))
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(f"PRAGMA user_version = {SCHEMA_VERSION:d}")


def _v1_to_v2(conn: Connection) -> None:
    """Version 1 (runs, metrics; version in SQLite's user_version only) gains the ``schema_info`` table."""
    schema_info.create(conn, checkfirst=True)


def _v2_to_v3(conn: Connection) -> None:
    """Version 2 gains the ``costs`` table (runs indexed before it simply have no cost rows)."""
    costs.create(conn, checkfirst=True)
    for index in costs.indexes:
        index.create(conn, checkfirst=True)


_MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3}
