"""Live progress of a run: done / errors / retries / rate, on a rich progress bar.

Suite kinds only ever call :meth:`Progress.advance`; whether anything is drawn (terminal, CI log, test) is
decided here. The counters are kept even when nothing is drawn, so the runner can print a final tally.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress


class Progress:
    """Counts exchanges; draws a rich bar when ``display`` (default: only on an interactive terminal)."""

    def __init__(self, total: int = 0, *, display: bool | None = None, console: Console | None = None) -> None:
        self.total = total
        self.done = 0
        self.errors = 0
        self.retries = 0
        self.resumed = 0  # exchanges found on disk by --resume: counted in done/errors/retries, not in the rate
        self._resumed_keys: set[tuple] = set()
        self._t0 = time.monotonic()
        self._console = console or Console(stderr=True)
        self._display = self._console.is_terminal if display is None else display
        self._bar: RichProgress | None = None
        self._task: Any = None
        self._label = ""

    def __enter__(self) -> Progress:
        if self._display:
            self._bar = RichProgress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("errors {task.fields[errors]}  retries {task.fields[retries]}  {task.fields[rate]} req/s"),
                TimeElapsedColumn(), console=self._console, transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self._label or "run", total=self.total or None, errors=0, retries=0,
                                            rate="0.0")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._refresh()
            self._bar.stop()
            self._bar = None

    def set_total(self, total: int) -> None:
        self.total = total
        if self._bar is not None:
            self._bar.update(self._task, total=total or None)

    def set_label(self, label: str) -> None:
        self._label = label
        if self._bar is not None:
            self._bar.update(self._task, description=label)

    @property
    def rate(self) -> float:
        dt = time.monotonic() - self._t0
        return (self.done - self.resumed) / dt if dt > 0 else 0.0

    def advance(self, n: int = 1, error: bool = False, retried: int = 0) -> None:
        """Record ``n`` finished exchanges (``error`` if they failed, ``retried`` extra attempts they took)."""
        self.done += n
        if error:
            self.errors += n
        self.retries += retried
        if self._bar is not None:
            self._refresh()

    def advance_resumed(self, records: Iterable[Any]) -> None:
        """Count exchanges an earlier, interrupted run already recorded (``--resume``), with their errors and
        retries, so the run's final figures cover the whole run and not only its last part."""
        n = errors = retries = 0
        for r in records:
            key = r.key()
            if key in self._resumed_keys:
                continue  # a kind that runs in passes (reference first) reports the same record once
            self._resumed_keys.add(key)
            n += 1
            errors += not r.ok
            retries += max(0, r.attempts - 1)
        self.done += n
        self.errors += errors
        self.retries += retries
        self.resumed += n
        if self._bar is not None:
            self._refresh()

    def _refresh(self) -> None:
        if self._bar is None:
            return
        self._bar.update(self._task, completed=self.done, errors=self.errors, retries=self.retries,
                         rate=f"{self.rate:.1f}")

    def tally(self) -> str:
        return f"{self.done} exchanges, {self.errors} errors, {self.retries} retries, {self.rate:.1f} req/s"
