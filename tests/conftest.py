"""Shared test fixtures. Kept tiny on purpose: every area's tests run in one pytest process."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from verifier.http import redaction
from verifier.testing import ScriptedServer


@pytest.fixture(autouse=True)
def _fresh_secret_registry() -> Iterator[None]:
    """Each test starts with no registered secrets: a secret one test registers (a URL user name, a key) must not
    mask model output in another test's run, as it would never happen across two ``verifier run`` processes."""
    redaction.forget_all()
    yield
    redaction.forget_all()


@pytest.fixture
def scripted_server() -> Iterator[Callable[..., ScriptedServer]]:
    """Factory: ``srv = scripted_server(responder, api_key=...)`` starts a real loopback server, stopped after the
    test."""
    started: list[ScriptedServer] = []

    def make(*args, **kwargs) -> ScriptedServer:
        srv = ScriptedServer(*args, **kwargs).start()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()
