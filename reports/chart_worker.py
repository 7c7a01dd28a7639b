"""Charts drawn in a forked worker process while ``verifier run`` is still measuring, or in-process.

Why a worker: the report's charts cost matplotlib's import (about 0.3 s) and some 0.05 s of layout each, CPU
that the run does not need until its very end. ``verifier run`` starts the worker before it measures, so
matplotlib is imported on another core while suites load and requests are sent, and the charts are drawn
there while the main process reads the records and compiles the template (on 2,000 loopback requests this
took about 0.4 s off the whole run: ``benchmarks/harness_throughput.py``).

Why this is safe to do: the chart functions (:mod:`reports.charts`) are pure, data in and SVG text out, and
the same functions run either way, so the report is the same byte for byte. The worker is forked (it starts
fast and inherits what is already imported) only on Linux, where forking a process that has no event loop
running yet is well understood; elsewhere, when the worker cannot start, dies, or does not answer within
:data:`WAIT_S`, a chart is drawn in-process instead. An exception raised by a chart function itself is
raised to the caller as it would be in-process.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

#: How long a chart may take in the worker before it is drawn in-process instead (a stuck worker never hangs a run).
WAIT_S = 60.0
#: Bound on joining the pool's manager thread once its worker is gone (it ends in milliseconds; never hang a run).
_MANAGER_JOIN_S = 5.0


def _prepare_worker(parent_pid: int) -> None:
    """In the worker, first thing: it dies with the run, and Ctrl-C is the run's to handle.

    Why: a run killed with ``kill -9`` cannot stop its worker, and the worker, blocked on a queue whose write
    end it inherited, would wait forever; Linux's parent-death signal kills it with the run (and a run already
    gone by now is caught by the pid check). SIGINT is ignored because the terminal sends Ctrl-C to the whole
    process group: the run handles it and stops the worker, without a traceback from the worker.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(0)


def _warm_up() -> None:
    """Import what drawing needs, in the worker, before the first chart is asked for."""
    import matplotlib.backends.backend_svg  # noqa: F401
    import matplotlib.figure  # noqa: F401


@dataclass
class ChartJob:
    """One chart being drawn: :meth:`result` is its SVG text."""

    draw: Callable[..., str]
    args: tuple[Any, ...]
    future: Future[str] | None = None
    drawer: ChartDrawer | None = None

    def result(self) -> str:
        if self.future is not None:
            try:
                return self.future.result(timeout=WAIT_S)
            except (BrokenProcessPool, FutureTimeout) as e:
                log.warning("chart worker unavailable (%s); drawing in-process", type(e).__name__)
                if self.drawer is not None:
                    self.drawer.stop_worker()
        return self.draw(*self.args)


class ChartDrawer:
    """Hands chart jobs to the worker process when one is running, else draws them when asked.

    Use as a context manager around the work the worker should overlap with; ``ChartDrawer()`` (no worker)
    draws every chart in-process, which is what re-rendering a finished run does.
    """

    def __init__(self, *, worker: bool = False) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._processes: list[multiprocessing.process.BaseProcess] = []
        if worker and sys.platform.startswith("linux"):
            before = {p.pid for p in multiprocessing.active_children()}
            try:
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"),
                                                 initializer=_prepare_worker, initargs=(os.getpid(),))
                self._pool.submit(_warm_up)  # forks the worker now, before the run starts its event loop
            except (OSError, ValueError, RuntimeError) as e:  # no fork here, or no process to spare
                log.warning("chart worker not started (%s); charts are drawn in-process", e)
                self._pool = None
            # ours, so a worker that hangs can be killed (the pool would otherwise wait for it at exit)
            self._processes = [p for p in multiprocessing.active_children() if p.pid not in before]

    @property
    def in_worker(self) -> bool:
        return self._pool is not None

    def submit(self, draw: Callable[..., str], *args: Any) -> ChartJob:
        """Start drawing ``draw(*args)`` in the worker; without one, it is drawn when its result is asked for."""
        if self._pool is not None:
            try:
                return ChartJob(draw, args, self._pool.submit(draw, *args), self)
            except (BrokenProcessPool, RuntimeError):
                self.stop_worker()
        return ChartJob(draw, args)

    def stop_worker(self, grace_s: float = 0.0) -> None:
        """No more jobs for the worker; one still busy after ``grace_s`` seconds (hung, or drawing what nobody
        awaits any more) is killed, so the pool never holds up the exit of the run.

        The pool's manager thread is joined last. Why: ``shutdown(wait=False)`` leaves that thread running, and
        when the run then exits at once (an early error: nothing to draw) the interpreter's exit hook
        (``concurrent.futures.process._python_exit``) wrote to the thread's wake-up pipe while the thread was
        closing it, printing an intermittent "Exception ignored ... Bad file descriptor" traceback under a clean
        one-line error. Once the worker is gone the thread ends within milliseconds; joining it leaves the exit
        hook nothing to race with. The pool keeps the thread in a private attribute, read with a fallback.
        """
        pool, self._pool = self._pool, None
        manager = getattr(pool, "_executor_manager_thread", None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        for process in self._processes:
            process.join(grace_s)
            if process.is_alive():
                process.kill()
                process.join()
        self._processes = []
        if manager is not None:
            manager.join(timeout=_MANAGER_JOIN_S)

    def close(self) -> None:
        self.stop_worker(grace_s=5.0)  # an idle worker exits at once when the pool shuts down

    def __enter__(self) -> ChartDrawer:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:  # the run failed or was interrupted: nothing will be drawn, do not wait for the worker
            self.stop_worker()
