"""The ``verifier`` command line: one Typer app, every command registered statically (in ``application``).

Exit codes: 0 the run ran; 2 usage or input error (bad flag, bad file, key env var unset, 401, unknown model);
3 the run failed (endpoint unreachable, a suite crashed, every exchange of an endpoint failed). Every error is
one line on stderr. ``python -m verifier.cli`` runs the same app as the ``verifier`` console script.

The app is built in :mod:`verifier.cli.application` and imported on first use (PEP 562): the console script's
entry (:mod:`verifier.cli.entry`) is inside this package, and what it starts before the commands are imported
(the built-in engines' interpreter, for ``verifier run``) must not wait for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verifier.cli.application import app


def __getattr__(name: str) -> Any:
    if name != "app":
        raise AttributeError(f"module 'verifier.cli' has no attribute {name!r}")
    from verifier.cli.application import app

    globals()["app"] = app
    return app


__all__ = ["app"]
