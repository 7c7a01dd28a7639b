"""Survival analysis: Kaplan-Meier curves and their medians, for "how long until the first X" metrics.

Why here and not in a kind: the agent suite's first-invalid-step and divergence-step medians use it today, and any
other time-to-event figure (a first wrong token, a first cache miss) would read the same curve.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from verifier.records import Interval


@dataclass
class Survival:
    """A Kaplan-Meier curve S(t) = P(T > t) on integer times, with a pointwise 95% band."""

    times: list[float]
    surv: list[float]
    low: list[float]
    high: list[float]
    n: int
    events: int

    def at(self, t: float) -> float:
        """S(t): the curve is right-continuous and stepwise."""
        value = 1.0
        for ti, si in zip(self.times, self.surv):
            if ti <= t:
                value = si
            else:
                break
        return value

    def band_at(self, t: float) -> tuple[float, float]:
        lo, hi = 1.0, 1.0
        for ti, l_, h_ in zip(self.times, self.low, self.high):
            if ti <= t:
                lo, hi = l_, h_
            else:
                break
        return lo, hi


def kaplan_meier(times: Sequence[float], events: Sequence[bool]) -> Survival | None:
    """Kaplan-Meier estimate with scipy's log-log (Greenwood) band; None when there is no observation."""
    if len(times) != len(events):
        raise ValueError("kaplan_meier: times and events differ in length")
    if not times:
        return None
    unc = [t for t, e in zip(times, events) if e]
    cen = [t for t, e in zip(times, events) if not e]
    from scipy import stats as sst  # here: scipy.stats costs ~0.5 s to import, and most runs draw no survival

    res = sst.ecdf(sst.CensoredData(uncensored=unc, right=cen))
    q = res.sf.quantiles.tolist()
    p = res.sf.probabilities.tolist()
    if unc:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # undefined band where S hits 0 or 1; handled below
            ci = res.sf.confidence_interval(confidence_level=0.95, method="log-log")
        lo = [0.0 if not np.isfinite(v) else float(v) for v in ci.low.probabilities]
        hi = [float(s) if not np.isfinite(v) else float(v) for v, s in zip(ci.high.probabilities, p)]
    else:
        lo, hi = list(p), list(p)
    return Survival(q, p, lo, hi, n=len(times), events=len(unc))


def km_median(curve: Survival | None) -> Interval:
    """Median survival time with the interval read off the band (Brookmeyer-Crowley style); None if never < 0.5."""
    if curve is None:
        return Interval(value=None, n=0, method="kaplan_meier")

    def first_below(values: list[float]) -> float | None:
        for t, v in zip(curve.times, values):
            if v <= 0.5:
                return float(t)
        return None

    return Interval(
        value=first_below(curve.surv),
        low=first_below(curve.low),
        high=first_below(curve.high),
        n=curve.n,
        method="kaplan_meier",
    )
