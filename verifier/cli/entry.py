"""The process entry of the ``verifier`` command (console script and ``python -m verifier.cli``).

Why not ``app()`` directly: a ``verifier run`` process holds hundreds of thousands of objects (and PyTorch, where
it forks its built-in engines itself), and the interpreter's teardown after the last line is written (freeing every
module, torch's globals included) took about 1 s of the 40 s default run (issue 43).
Here the command runs as usual, then the standard streams are flushed and the atexit handlers run, and the process
leaves with its exit code without that teardown. Nothing is lost by skipping it: every file the commands write is
closed by then (``with`` blocks; SQLite commits), and threads still running are daemons by design.

In-process callers (tests with Typer's ``CliRunner``) use :data:`verifier.cli.app` and never reach this.

A ``verifier run`` that serves built-in engines starts their interpreter first of all, before the command line
is even imported (:mod:`reference_engine.engine_zygote`): it imports the engine on the second core while this
process imports the harness, and the engines start about a second sooner (issue 43).
"""

from __future__ import annotations

import atexit
import os
import sys

#: ``run`` flags that name endpoints: with none, the run serves the built-in default
ENDPOINT_FLAGS = ("--reference", "--endpoint", "-e", "--config")


def serves_builtin_engines(argv: list[str]) -> bool:
    """Whether this command line is a ``verifier run`` that starts built-in engines, as far as its words tell: no
    endpoint flag (the embedded default), or a ``builtin:`` URL among them. A TOML file's endpoints are not read
    here (the engines then start as they always did, a second later); a dry run starts none."""
    if argv[1:2] != ["run"] or "--dry-run" in argv or "--help" in argv:
        return False
    named = any(a in ENDPOINT_FLAGS or a.split("=", 1)[0] in ENDPOINT_FLAGS for a in argv[2:])
    return not named or any("builtin:" in a for a in argv[2:])


def exit_status(code: object) -> int:
    """What the interpreter would exit with for ``SystemExit(code)``: None is 0, an int itself, anything else 1
    (its text goes to stderr, as Python prints it)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def main() -> None:
    """Run the command line; leave with its exit status, skipping only the interpreter's teardown."""
    if serves_builtin_engines(sys.argv):
        from reference_engine import engine_zygote

        engine_zygote.start()
    from verifier.cli.application import app

    try:
        app()
        status = 0
    except SystemExit as e:  # Typer's standalone mode always ends here, on success too
        status = exit_status(e.code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``verifier ... | head``): nothing more can be written
            pass
    atexit._run_exitfuncs()
    os._exit(status)
