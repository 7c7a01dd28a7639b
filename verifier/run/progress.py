"""Live progress of a run: done / errors / retries / rate, on a rich progress bar or as plain lines.

Suite kinds only ever call :meth:`Progress.advance`; whether anything is drawn (terminal, CI log, test) is
decided here. On a terminal a rich bar; elsewhere (CI, ``| tee``, a log file) one plain line every
``VERIFIER_PROGRESS_INTERVAL_S`` seconds (default 10), because a bar redrawn in place is noise in a log and nothing
at all for minutes reads as a hung job. The counters are kept even when nothing is drawn (``--quiet``), so the
runner can print a final tally.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

#: seconds between plain progress lines when the output is not a terminal
DEFAULT_PLAIN_INTERVAL_S = 10.0


def plain_interval() -> float:
    """``$VERIFIER_PROGRESS_INTERVAL_S`` when it is a positive number, else 10 s."""
    try:
        value = float(os.environ.get("VERIFIER_PROGRESS_INTERVAL_S", ""))
    except ValueError:
        return DEFAULT_PLAIN_INTERVAL_S
    return value if value > 0 else DEFAULT_PLAIN_INTERVAL_S


class Progress:
    """Counts exchanges and shows them: ``display`` True draws a rich bar, False shows nothing (``--quiet``), None
    (the default) draws the bar on a terminal and otherwise prints a plain line every ``plain_interval_s``."""

    def __init__(self, total: int = 0, *, display: bool | None = None, console: Console | None = None,
                 plain_interval_s: float | None = None) -> None:
        self.total = total
        self.done = 0
        self.errors = 0
        self.retries = 0
        self.resumed = 0  # exchanges found on disk by --resume: counted in done/errors/retries, not in the rate
        self._resumed_keys: set[tuple] = set()
        self._t0 = time.monotonic()
        self._console = console or Console(stderr=True)
        self._display = self._console.is_terminal if display is None else display
        self._plain = display is None and not self._display
        self._plain_interval = plain_interval_s or plain_interval()
        self._plain_stop = threading.Event()
        self._plain_thread: threading.Thread | None = None
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
        elif self._plain:
            self._plain_stop.clear()
            self._plain_thread = threading.Thread(target=self._plain_lines, name="verifier-progress", daemon=True)
            self._plain_thread.start()
        return self

    def _plain_lines(self) -> None:
        """Every interval, one line (a thread, so a minute-long exchange still shows the run is alive)."""
        while not self._plain_stop.wait(self._plain_interval):
            self._console.print(self.plain_line(), markup=False, highlight=False, soft_wrap=True)
            self._console.file.flush()

    def plain_line(self) -> str:
        """``progress toolcall-core: 120/480 exchanges, 2 errors, 5 retries, 3.4 req/s, 70 s``."""
        total = f"/{self.total}" if self.total else ""
        return (f"progress {self._label or 'run'}: {self.done}{total} exchanges, {self.errors} errors, "
                f"{self.retries} retries, {self.rate:.1f} req/s, {time.monotonic() - self._t0:.0f} s")

    def __exit__(self, *exc: Any) -> None:
        if self._plain_thread is not None:
            self._plain_stop.set()
            self._plain_thread.join()
            self._plain_thread = None
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
