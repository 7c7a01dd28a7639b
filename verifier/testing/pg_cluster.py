"""A throw-away PostgreSQL server for tests and benchmarks: ``initdb`` + ``pg_ctl`` in a temporary directory.

Used by ``tests/history`` (a session fixture) and ``benchmarks/history_writers.py``. The server listens on
127.0.0.1 only, at a free port, with password (SCRAM) authentication, fsync off (a test server: speed over
durability), and is stopped and deleted on exit. PostgreSQL refuses to run as root, so under root (CI containers)
it runs as the ``postgres`` system user through ``runuser``. The binaries come from Debian's layout
(``/usr/lib/postgresql/<version>/bin``, newest first) or from ``initdb`` on PATH.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

__all__ = ["PostgresUnavailable", "TemporaryPostgres"]

_TIMEOUT_S = 60


class PostgresUnavailable(RuntimeError):
    """The server cannot be started here; the message says why (no binaries, no unprivileged user, ...)."""


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _literal(value: str) -> str:
    """A SQL string literal (CREATE ROLE takes no bind parameters)."""
    return "'" + value.replace("'", "''") + "'"


class TemporaryPostgres:
    """``with TemporaryPostgres() as pg: url = pg.url(pg.create_database(owner))``; gone after the block."""

    def __init__(self) -> None:
        self.port = 0
        self.superuser_password = uuid.uuid4().hex
        self._root: Path | None = None
        self._bindir: Path | None = None
        self._as_user: list[str] = []
        self._started = False

    def start(self) -> TemporaryPostgres:
        bindir = _bindir()
        if bindir is None:
            raise PostgresUnavailable("server binaries (initdb, pg_ctl) not found; install Debian's postgresql package")
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise PostgresUnavailable("the psycopg driver is not installed") from exc
        owner = None
        if os.geteuid() == 0:  # postgres refuses to run as root
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise PostgresUnavailable("running as root and there is no 'postgres' user "
                                          "to run the server as") from exc
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self._bindir = bindir
        self._root = root = Path(tempfile.mkdtemp(prefix="verifier-pg-"))
        data, sock, pwfile, log = root / "data", root / "sock", root / "pw", root / "server.log"
        sock.mkdir()
        pwfile.write_text(self.superuser_password + "\n")
        if owner is not None:
            for p in (root, sock, pwfile):
                os.chown(p, owner.pw_uid, owner.pw_gid)
        try:
            init = subprocess.run(
                [*self._as_user, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", f"--pwfile={pwfile}",
                 "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"],
                capture_output=True, text=True, timeout=_TIMEOUT_S)
            if init.returncode != 0:
                raise PostgresUnavailable(f"initdb failed: {(init.stderr or init.stdout).strip().splitlines()[-1:]}")
            for _ in range(3):  # a free port can be taken between choosing and binding it: try another
                self.port = _free_port()
                start = subprocess.run(
                    [*self._as_user, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w",
                     "-t", str(_TIMEOUT_S),
                     "-o", f"-p {self.port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off",
                     "start"],
                    capture_output=True, text=True, timeout=_TIMEOUT_S + 10)
                if start.returncode == 0:
                    self._started = True
                    break
            if not self._started:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
                raise PostgresUnavailable(f"pg_ctl start failed: {tail}")
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + _TIMEOUT_S
        while True:
            try:
                with psycopg.connect(self.superuser_dsn(), connect_timeout=5):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        if self._started and self._bindir is not None and self._root is not None:
            subprocess.run([*self._as_user, str(self._bindir / "pg_ctl"), "-D", str(self._root / "data"), "-m", "fast",
                            "-w", "stop"], capture_output=True, timeout=_TIMEOUT_S)
            self._started = False
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def __enter__(self) -> TemporaryPostgres:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def superuser_dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres password={self.superuser_password} dbname={dbname}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.superuser_dsn(), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]  # our own identifiers and literals

    def create_role(self, name: str, password: str) -> None:
        self._admin(f'CREATE ROLE "{name}" LOGIN PASSWORD {_literal(password)}')

    def create_database(self, owner: str) -> str:
        name = f"history_{uuid.uuid4().hex[:12]}"
        self._admin(f'CREATE DATABASE "{name}" OWNER "{owner}"')
        return name

    def drop_database(self, name: str) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def url(self, dbname: str, user: str, password: str) -> str:
        """The ``postgresql://`` URL a user would pass to ``--db`` (the password percent-encoded)."""
        return f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}@127.0.0.1:{self.port}/{dbname}"
