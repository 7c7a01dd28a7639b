"""Where the history lives: a SQLite file (the default) or a PostgreSQL server named by URL.

``--db`` and ``$VERIFIER_DB`` take either a file path or ``postgresql://user@host:port/db``. Everything the rest of
the package needs to know about that choice is in one ``HistoryLocation``: the SQLAlchemy URL to connect with, the
file (for SQLite), and a *display* form that is the only form ever printed or stored. The display form drops the
URL's user information and any credential-like query parameter, because a PostgreSQL URL usually carries a password
and the places the location is shown (CLI messages, the report's "From ..." line, CI logs) are public.

Redaction here is a small local helper rather than ``reports.disclosure.redact_url`` (the report layer; the history
package must not import it) or the general redaction module another branch is adding; it can move there later.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from urllib.parse import quote

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from verifier.history.model import HistoryError

__all__ = [
    "DbArg",
    "HistoryLocation",
    "default_db_path",
    "default_location",
    "describe_db",
    "history_exists",
    "redact_db_text",
    "resolve_db",
]

#: Driver SQLAlchemy uses for PostgreSQL: psycopg 3 (its own default would be psycopg2, which we do not ship).
PG_DRIVER = "postgresql+psycopg"

_URL_START = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_PG_SCHEME = re.compile(r"^(postgres|postgresql)(\+[A-Za-z0-9_]+)?$")
# A URL that went through pathlib loses one slash of its '//' ("postgresql:/u@h/db"); see resolve_db.
_COLLAPSED_PG = re.compile(r"^(postgres(?:ql)?(?:\+[A-Za-z0-9_]+)?):/(?!/)")
# userinfo of any URL inside free text: everything from '//' up to the last '@' before a blank or a quote
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)[^\s'\"]*@")
_SECRET_PARAM = re.compile(r"([?&][A-Za-z_]*(?:password|secret|token|key)[A-Za-z_]*=)[^&\s'\"]*", re.IGNORECASE)
_SECRET_QUERY_KEY = re.compile(r"password|secret|token|key", re.IGNORECASE)

@dataclass(frozen=True)
class HistoryLocation:
    """One history database: a SQLite file (``path`` set) or a PostgreSQL server (``path`` None)."""

    url: URL = field(repr=False)
    path: Path | None = None

    @property
    def is_server(self) -> bool:
        """True for PostgreSQL: there is no file to look for, and several machines may write at once."""
        return self.path is None

    @property
    def display(self) -> str:
        """The form that may be printed or stored: the file path, or the URL without credentials."""
        if self.path is not None:
            return str(self.path)
        u = self.url
        scheme = "postgresql"
        userinfo = "***@" if (u.username or u.password) else ""
        host = u.host or ""
        port = f":{u.port}" if u.port else ""
        query = "&".join(
            f"{k}={'***' if _SECRET_QUERY_KEY.search(k) else quote(str(v), safe='/:,')}"
            for k, vs in sorted(u.query.items()) for v in (vs if isinstance(vs, tuple) else (vs,))
        )
        return f"{scheme}://{userinfo}{host}{port}/{u.database or ''}" + (f"?{query}" if query else "")

    def exists(self) -> bool:
        """Whether there is history to read: the file exists; a server is assumed to (connecting will tell)."""
        return self.path.exists() if self.path is not None else True

    def scrub(self, text: str) -> str:
        """``text`` (an error message from a driver, say) with this location's password and any URL userinfo removed."""
        password = self.url.password
        if password:
            for form in {str(password), quote(str(password), safe="")}:
                text = text.replace(form, "***")
        return redact_db_text(text)

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        return f"HistoryLocation({self.display!r})"


#: What every history function accepts as ``db``: ``None`` (the default database), a path, a URL, or a location.
DbArg = str | os.PathLike[str] | HistoryLocation | None


def redact_db_text(text: str) -> str:
    """Any database URL's user information and credential-like query values in ``text`` replaced by ``***``."""
    return _SECRET_PARAM.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


def default_db_path() -> Path:
    """The SQLite file used when neither ``--db`` nor a URL in ``$VERIFIER_DB`` names another database.

    ``$VERIFIER_DB`` if it is a path, else ``$XDG_DATA_HOME/verifier/history.sqlite``, else
    ``~/.local/share/verifier/history.sqlite``. When ``$VERIFIER_DB`` holds a server URL there is no default
    *path*; use ``default_location()`` (or pass ``None`` to the history functions), which understands both.
    """
    env = os.environ.get("VERIFIER_DB")
    if env:
        if _URL_START.match(env):
            raise HistoryError(f"$VERIFIER_DB is a database URL ({redact_db_text(env)}), not a file path")
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "verifier" / "history.sqlite"


def default_location() -> HistoryLocation:
    """The history database when no ``--db`` is given: ``$VERIFIER_DB`` (path or URL), else the default file."""
    env = os.environ.get("VERIFIER_DB")
    return resolve_db(env) if env else resolve_db(default_db_path())


def resolve_db(db: DbArg) -> HistoryLocation:
    """Turn what a user or caller gave (``None`` = the default, a path, a URL, a location) into a location.

    A PostgreSQL URL that reached us as a ``Path`` (a CLI option typed ``Path``) has had its ``//`` collapsed to
    ``/`` by pathlib; the scheme cannot be a real relative directory name by accident, so the slash is restored.
    """
    if db is None:
        return default_location()
    if isinstance(db, HistoryLocation):
        return db
    text = os.fspath(db)
    if isinstance(db, PurePath):
        text = _COLLAPSED_PG.sub(r"\1://", text)
    if not _URL_START.match(text):
        return _sqlite(Path(text).expanduser())
    scheme = text.split("://", 1)[0].lower()
    if scheme in ("sqlite", "sqlite+pysqlite"):
        path = text.split("://", 1)[1]
        if not path.startswith("/") or path == "/":
            raise HistoryError(f"{text}: a sqlite URL needs a file (sqlite:///relative/path or sqlite:////abs/path)")
        return _sqlite(Path(path[1:]).expanduser())
    if not _PG_SCHEME.match(scheme):
        raise HistoryError(f"{redact_db_text(text)}: unsupported database URL; give a SQLite file path or a "
                           f"postgresql://user@host:port/dbname URL")
    try:
        url = make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise HistoryError(f"{redact_db_text(text)}: not a valid database URL") from exc
    if not url.database:
        raise HistoryError(f"{redact_db_text(text)}: the URL names no database (postgresql://user@host:port/dbname)")
    return HistoryLocation(url=url.set(drivername=PG_DRIVER))


def describe_db(db: DbArg) -> str:
    """The printable (credential-free) name of a history database, for messages and reports."""
    try:
        return resolve_db(db).display
    except HistoryError:  # not a usable location, but still say which one, without credentials
        raw = os.environ.get("VERIFIER_DB", "") if db is None else os.fspath(db)  # type: ignore[arg-type]
        return redact_db_text(raw)


def history_exists(db: DbArg) -> bool:
    """True when there is a history to read: the SQLite file exists, or a server URL is given."""
    try:
        return resolve_db(db).exists()
    except HistoryError:
        return False


def _sqlite(path: Path) -> HistoryLocation:
    return HistoryLocation(url=URL.create("sqlite+pysqlite", database=str(path)), path=path)
