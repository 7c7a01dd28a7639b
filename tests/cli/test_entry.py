"""The process entry (``verifier`` / ``python -m verifier.cli``) skips the interpreter's teardown: it must still
give the command's exit status, flush what was printed into a pipe, and run the atexit handlers (logging's flush,
multiprocessing's clean-up) before it leaves."""

from __future__ import annotations

import subprocess
import sys

import pytest

from verifier.cli.entry import exit_status, serves_builtin_engines

_PROGRAM = """
import atexit, sys
atexit.register(lambda: print("atexit handler ran", flush=True))
sys.argv = ["verifier", *sys.argv[1:]]
from verifier.cli.entry import main
main()
"""


def _entry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _PROGRAM, *args], capture_output=True, text=True, timeout=120)


def test_success_flushes_piped_output_and_runs_atexit() -> None:
    p = _entry("suites", "list")
    assert p.returncode == 0, p.stderr
    assert "toolcall-smoke" in p.stdout  # the table reached the pipe
    assert p.stdout.rstrip().endswith("atexit handler ran")  # after the command's output, before leaving


def test_usage_error_keeps_its_exit_status() -> None:
    p = _entry("run", "--no-such-flag")
    assert p.returncode == 2
    assert "no-such-flag" in p.stderr
    assert "atexit handler ran" in p.stdout


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (3, 3), (130, 130), (256 + 2, 2)])
def test_exit_status_follows_the_interpreter(code: object, status: int) -> None:
    assert exit_status(code) == status


def test_exit_status_of_a_message_is_one_and_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_status("cannot go on") == 1
    assert capsys.readouterr().err == "cannot go on\n"


@pytest.mark.parametrize(("argv", "early"), [
    (["run", "--out", "runs/default"], True),                                  # the embedded default
    (["run", "--reference", "bf16=builtin:tiny", "-e", "q=builtin:tiny?kv=fp8"], True),
    (["run", "--endpoint=builtin:tiny"], True),
    (["run", "--reference", "https://api.example.com/v1", "--model", "m"], False),   # a provider only
    (["run", "--config", "endpoints.toml"], False),                            # a file: engines start as before
    (["run", "--dry-run"], False),                                             # sends nothing, starts nothing
    (["run", "--help"], False),
    (["report", "runs/default"], False),
    ([], False),
])
def test_only_a_run_with_builtin_engines_starts_their_interpreter_first(argv: list[str], early: bool) -> None:
    assert serves_builtin_engines(["verifier", *argv]) is early


def test_the_cli_starts_without_importing_torch() -> None:
    """Why the entry can start the engines' interpreter before anything heavy: importing it (and the package
    surface) imports neither the commands nor PyTorch."""
    heavy = ("torch", "verifier.cli.application", "verifier.run.runner")
    code = f"import sys, verifier.cli.entry, verifier; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
