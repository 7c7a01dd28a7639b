"""Connections to a history database: one SQLAlchemy engine per call, transactions that tolerate concurrent writers.

Several jobs may index runs into one history at the same moment (a nightly matrix finishing together):

- SQLite: a write transaction starts with ``BEGIN IMMEDIATE``, taking the file's write lock at once; a second
  writer waits for it (30 s busy timeout) instead of failing half-way with "database is locked" when a deferred
  transaction tries to upgrade its read lock. pysqlite's own implicit transactions are switched off for this
  (SQLAlchemy's documented recipe), so the ``BEGIN`` we send is the one that counts.
- PostgreSQL: ordinary READ COMMITTED transactions; row-level conflicts (the same run indexed twice at once) are
  settled by the upsert on ``runs.run_id`` in ``indexing``, and schema creation by an advisory lock in ``schema``.

Every driver error leaves as a one-line ``HistoryError`` naming the database by its credential-free display form.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from verifier.history.location import HistoryLocation
from verifier.history.model import HistoryError
from verifier.history.schema import (
    SCHEMA_VERSION,
    check_version,
    ensure_schema,
    stored_version,
)

__all__ = ["connect_for_read", "connect_for_write", "history_errors"]

_SQLITE_BUSY_TIMEOUT_S = 30.0
_PG_CONNECT_TIMEOUT_S = 10


def _engine(loc: HistoryLocation) -> Engine:
    if loc.path is not None:
        engine = create_engine(loc.url, poolclass=NullPool, connect_args={"timeout": _SQLITE_BUSY_TIMEOUT_S})

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we send BEGIN ourselves (below)
            dbapi_conn.execute("PRAGMA foreign_keys = ON")

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            immediate = conn.get_execution_options().get("history_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine
    return create_engine(loc.url, poolclass=NullPool, connect_args={"connect_timeout": _PG_CONNECT_TIMEOUT_S})


@contextmanager
def history_errors(loc: HistoryLocation, doing: str = "history database error") -> Iterator[None]:
    """Translate driver errors into one-line ``HistoryError``s without credentials: "<db>: <doing> (<why>)"."""
    try:
        yield
    except HistoryError:
        raise
    except SQLAlchemyError as exc:
        orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        detail = loc.scrub(" ".join(str(orig).split()) or type(orig).__name__)
        if loc.path is not None and "not a database" in detail:
            doing = "not a usable history database"
        raise HistoryError(f"{loc.display}: {doing} ({detail})") from None


@contextmanager
def _connection(loc: HistoryLocation) -> Iterator[Connection]:
    engine = _engine(loc)
    try:
        with history_errors(loc, "cannot open the history database" if loc.path is not None
                            else "cannot connect to the history database"):
            conn = engine.connect()
        with history_errors(loc), conn:
            yield conn
    finally:
        engine.dispose()


def _migrate_if_needed(conn: Connection, loc: HistoryLocation) -> None:
    """Read the version cheaply; only an older or empty database takes the write lock to create or migrate."""
    with conn.begin():
        version = stored_version(conn)
    check_version(version, loc.display)
    if version != SCHEMA_VERSION:
        conn.execution_options(history_write=True)
        try:
            with conn.begin():
                ensure_schema(conn, loc.display)
        finally:
            conn.execution_options(history_write=False)


@contextmanager
def connect_for_write(loc: HistoryLocation) -> Iterator[Connection]:
    """One write transaction on an up-to-date schema: committed on success, rolled back on any error."""
    if loc.path is not None:
        loc.path.parent.mkdir(parents=True, exist_ok=True)
    with _connection(loc) as conn:
        _migrate_if_needed(conn, loc)
        conn.execution_options(history_write=True)
        with conn.begin():
            yield conn


@contextmanager
def connect_for_read(loc: HistoryLocation) -> Iterator[tuple[Connection, int]]:
    """A connection in one read transaction (a consistent snapshot), with the database's schema version.

    Reading never writes: an older schema is read as it is (every version so far has the same ``runs`` and
    ``metrics`` columns) and migrated only by the next write. So a report or a ``verifier history`` listing
    run by a newer verifier leaves a history that older verifiers still share untouched. Version 0 means there
    are no history tables yet (an empty database): the caller reads nothing.
    """
    with _connection(loc) as conn, conn.begin():
        version = stored_version(conn)
        check_version(version, loc.display)
        yield conn, version
