"""The run's stopwatch: wall seconds per phase (engines, preflight, each suite, probes, scoring) as a RunTimings.

Why a separate clock: the runner's phases are nested in context managers and an event loop; a clock object that
each phase reports to keeps the timing out of the runner's logic (one ``with clock.phase(...)`` per phase).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from verifier.run.summary import RunTimings, SuiteTiming

Phase = Literal["engines", "preflight", "probes", "scoring"]


class RunClock:
    """Started when the runner begins; :meth:`timings` reads everything measured so far."""

    def __init__(self) -> None:
        self.started_unix = time.time()
        self._t0 = time.perf_counter()
        self._phases: dict[str, float] = {}
        self._suites: list[SuiteTiming] = []

    @contextmanager
    def phase(self, name: Phase) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self._phases[name] = self._phases.get(name, 0.0) + time.perf_counter() - t

    def add(self, name: Phase, seconds: float) -> None:
        self._phases[name] = self._phases.get(name, 0.0) + seconds

    def suite(self, name: str, seconds: float, exchanges: int) -> None:
        self._suites.append(SuiteTiming(suite=name, seconds=round(seconds, 3), exchanges=exchanges))

    def timings(self) -> RunTimings:
        p = {k: round(v, 3) for k, v in self._phases.items()}
        return RunTimings(started_unix=self.started_unix,
                          finished_unix=self.started_unix + time.perf_counter() - self._t0,
                          engines_s=p.get("engines", 0.0), preflight_s=p.get("preflight", 0.0),
                          suites=list(self._suites), probes_s=p.get("probes", 0.0), scoring_s=p.get("scoring", 0.0))
