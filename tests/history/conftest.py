"""A real, temporary PostgreSQL server for the history tests.

``postgres_server`` (session scope) starts ``verifier.testing.pg_cluster.TemporaryPostgres`` (initdb + pg_ctl in
a temporary directory, 127.0.0.1 at a free port, SCRAM passwords, run as the ``postgres`` user under root) and
stops it at the end of the session. ``pg_url`` gives each test a fresh database owned by a password-protected
role, as the URL a user would pass to ``--db``.

Where the server cannot start (no binaries, no unprivileged user, initdb failing) the tests that need it skip with
the reason, unless ``VERIFIER_REQUIRE_POSTGRES=1`` (set by ``.ci/run`` once it has installed PostgreSQL), where
that is a test failure instead: CI must not pass by skipping.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from verifier.testing.pg_cluster import PostgresUnavailable, TemporaryPostgres

#: The test role's password has URL-special characters on purpose: the URL must be built and parsed correctly,
#: and it must never show up in any output.
PG_PASSWORD = "s3cr/t@pw:HISTORY-PG-PASSWORD"
PG_ROLE = "verifier_test"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryPostgres]:
    server = TemporaryPostgres()
    try:
        server.start()
    except PostgresUnavailable as exc:
        if os.environ.get("VERIFIER_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL test server required (VERIFIER_REQUIRE_POSTGRES=1) but: {exc}")
        pytest.skip(f"no PostgreSQL test server: {exc}")
    try:
        server.create_role(PG_ROLE, PG_PASSWORD)
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(postgres_server: TemporaryPostgres) -> Iterator[str]:
    """A fresh, empty database on the test server, as the URL a user would pass to ``--db``."""
    name = postgres_server.create_database(PG_ROLE)
    yield postgres_server.url(name, PG_ROLE, PG_PASSWORD)
    postgres_server.drop_database(name)
