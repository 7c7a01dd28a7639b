"""The two ways a run ends early, each with its exit code: bad input (2) and a failed run (3)."""

from __future__ import annotations


class InputError(Exception):
    """Bad input (usage, files, env): exit code 2. The message is one line."""

    exit_code = 2


class RunFailed(Exception):
    """The run could not complete or produced nothing usable: exit code 3. ``lines`` say why."""

    exit_code = 3

    def __init__(self, lines: list[str], exit_code: int = 3) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines
        self.exit_code = exit_code
