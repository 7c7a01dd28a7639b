"""A real, temporary PostgreSQL server for the history tests.

``postgres_server`` (session scope) runs ``initdb`` and ``pg_ctl`` from the installed server binaries
(``/usr/lib/postgresql/<version>/bin`` on Debian, or ``initdb`` on PATH) in a temporary directory, listening on
127.0.0.1 at a free port with password (SCRAM) authentication, and stops and deletes it at the end of the session.
PostgreSQL refuses to run as root, so under root (CI) the server runs as the ``postgres`` system user via
``runuser``. ``pg_url`` gives each test a fresh database owned by a password-protected role.

Where the server cannot start (no binaries, no unprivileged user, initdb failing) the tests that need it skip with
the reason, unless ``VERIFIER_REQUIRE_POSTGRES=1`` (set by ``.ci/run`` once it has installed PostgreSQL), where
that is a test failure instead: CI must not pass by skipping.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

#: The test role's password has URL-special characters on purpose: the URL must be built and parsed correctly,
#: and it must never show up in any output.
PG_PASSWORD = "s3cr/t@pw:HISTORY-PG-PASSWORD"
PG_ROLE = "verifier_test"
_START_TIMEOUT_S = 60


@dataclass
class PostgresServer:
    """A running temporary cluster: where it listens and how to make databases in it."""

    port: int
    superuser_password: str

    def superuser_dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres password={self.superuser_password} dbname={dbname}"

    def url(self, dbname: str) -> str:
        return f"postgresql://{PG_ROLE}:{quote(PG_PASSWORD, safe='')}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self) -> str:
        import psycopg

        name = f"history_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.superuser_dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" OWNER {PG_ROLE}')
        return name

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.superuser_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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


def _unavailable(reason: str) -> None:
    if os.environ.get("VERIFIER_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PostgreSQL test server required (VERIFIER_REQUIRE_POSTGRES=1) but {reason}")
    pytest.skip(f"no PostgreSQL test server: {reason}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bindir = _bindir()
    if bindir is None:
        _unavailable("server binaries (initdb, pg_ctl) not found; install Debian's postgresql package")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("the psycopg driver is not installed")
    as_user: list[str] = []
    owner: pwd.struct_passwd | None = None
    if os.geteuid() == 0:  # postgres refuses to run as root
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root and there is no 'postgres' system user to run the server as")
        as_user = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="verifier-pg-"))
    data, sock, pwfile, log = root / "data", root / "sock", root / "pw", root / "server.log"
    sock.mkdir()
    superuser_password = uuid.uuid4().hex
    pwfile.write_text(superuser_password + "\n")
    if owner is not None:
        for p in (root, sock, pwfile):
            os.chown(p, owner.pw_uid, owner.pw_gid)
    port = 0
    started = False
    try:
        init = subprocess.run(
            [*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", f"--pwfile={pwfile}",
             "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"],
            capture_output=True, text=True, timeout=_START_TIMEOUT_S)
        if init.returncode != 0:
            _unavailable(f"initdb failed: {(init.stderr or init.stdout).strip().splitlines()[-1:]}")
        for _ in range(3):  # a free port can be taken between choosing and binding it: try another
            port = _free_port()
            start = subprocess.run(
                [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", str(_START_TIMEOUT_S),
                 "-o", f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                capture_output=True, text=True, timeout=_START_TIMEOUT_S + 10)
            if start.returncode == 0:
                started = True
                break
        if not started:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
            _unavailable(f"pg_ctl start failed: {tail}")
        server = PostgresServer(port=port, superuser_password=superuser_password)
        import psycopg

        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            try:
                with psycopg.connect(server.superuser_dsn(), autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"CREATE ROLE {PG_ROLE} LOGIN PASSWORD {_literal(PG_PASSWORD)}")
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield server
    finally:
        if started:
            subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           capture_output=True, timeout=_START_TIMEOUT_S)
        shutil.rmtree(root, ignore_errors=True)


def _literal(value: str) -> str:
    """A SQL string literal (CREATE ROLE takes no bind parameters)."""
    return "'" + value.replace("'", "''") + "'"


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database on the test server, as the URL a user would pass to ``--db``."""
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)
