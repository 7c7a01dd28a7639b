"""The tests behind the verdict, read off the 95% intervals the summary already carries.

Why from intervals: every headline difference in ``summary.json`` comes with its own 95% interval, computed by the
method that suits its unit (Newcombe for paired proportions, cluster-robust t across scenarios, bootstrap over
prompts for KL). Reading the tests off those intervals keeps one source of truth and lets any summary be judged
again. Each test uses the half of the interval that faces the bound it is tested against (the intervals are often
asymmetric near 0 and 1), with the normal approximation ``se = half-width / 1.96``.

Conventions (docs/verdict.md):

* ``p_outside``: H0 "|d| <= margin" against "d is beyond the margin", two-sided by the interval's convention:
  ``2 * min`` of the two one-sided p-values, so that "significant at level a" means "the two-sided (1 - a) interval
  lies wholly beyond the margin".
* ``p_inside``: two one-sided tests (TOST) of "|d| < margin", the larger p, doubled to the same two-sided
  convention: at level a this is "the two-sided (1 - a) interval lies inside the margin" (TOST at a/2 per side). An
  intersection-union test needs no multiplicity correction.
* A zero-width interval is never proof: :func:`widen_zero_spread` replaces it by an exact bound, or the caller
  treats the metric as having no interval at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

from verifier.records import Interval

_NORMAL = NormalDist()  # the standard library's normal: scipy.stats costs ~0.5 s to import
Z95 = _NORMAL.inv_cdf(0.975)

#: which sides of the margin a metric can fall on: both (a difference), only above (KL >= 0), only below
#: (a shortfall from perfect agreement, the legacy trigger-F1 figure).
Sides = Literal["both", "upper", "lower"]


@dataclass(frozen=True)
class Spread:
    """Standard errors implied by the lower and upper halves of a 95% interval around ``d``."""

    d: float
    below: float  # (d - low) / 1.96
    above: float  # (high - d) / 1.96

    def facing(self, toward: float) -> float:
        """The standard error on the side of ``d`` that faces ``toward``; the other side when that one is flat."""
        first, other = (self.above, self.below) if toward > self.d else (self.below, self.above)
        return first if first > 0 else other


def spread(iv: Interval) -> Spread | None:
    """The two half-widths of ``iv`` as standard errors; None without a value, an interval, or with zero width."""
    if iv.value is None or iv.low is None or iv.high is None:
        return None
    d = float(iv.value)
    below, above = max(0.0, d - iv.low) / Z95, max(0.0, iv.high - d) / Z95
    if below == 0.0 and above == 0.0:
        return None
    return Spread(d, below, above)


def zero_width(iv: Interval) -> bool:
    """An interval that claims certainty: a value with both ends on it (or no ends at all)."""
    return iv.value is not None and (iv.low is None or iv.high is None or iv.low == iv.high)


def zero_spread_bound(units: int, alpha: float) -> float:
    """Exact (Clopper-Pearson) one-sided 1 - alpha/2 bound on the share of units unlike the ones seen.

    When every one of ``units`` independent units showed the same difference, the share that would not is at most
    ``1 - (alpha/2) ** (1/units)`` (4 units: 60 %; 12: 26 %; 60: 6 %). Each unit moves a proportion by at most
    its range, so this bounds how far the true mean can be from what was seen.
    """
    if units <= 0:
        return 1.0
    return 1.0 - (alpha / 2.0) ** (1.0 / units)


def widen_zero_spread(iv: Interval, units: int, alpha: float) -> Interval:
    """A zero-width difference of proportions (range [-1, 1]) replaced by its exact bound; see docs/verdict.md."""
    assert iv.value is not None
    d = float(iv.value)
    b = zero_spread_bound(units, alpha)
    return Interval(value=d, low=max(-1.0, d - b * (d + 1.0)), high=min(1.0, d + b * (1.0 - d)), n=iv.n,
                    method=f"{iv.method or 'interval'}+exact_zero_spread_bound")


def _sf(z: float) -> float:
    return 1.0 - _NORMAL.cdf(z)


def p_outside(s: Spread, margin: float, sides: Sides = "both") -> float:
    """Two-sided p of H0 |d| <= margin (``upper``: H0 d <= margin): small when d is shown beyond the margin."""
    p_high = _sf((s.d - margin) / s.facing(margin))  # evidence for d > margin
    p_low = _sf((-margin - s.d) / s.facing(-margin))  # evidence for d < -margin
    one = {"both": min(p_high, p_low), "upper": p_high, "lower": p_low}[sides]
    return min(1.0, 2.0 * one)


def p_inside(s: Spread, margin: float, sides: Sides = "both") -> float:
    """p of "|d| < margin" (``upper``: d < margin; ``lower``: d > -margin): small when shown inside.

    Two one-sided tests, reported on the same two-sided convention as :func:`p_outside` (``2 * max``): at level a it
    means "the two-sided (1 - a) interval lies inside the margin", so the interval a reader sees decides both ways.
    """
    p_below_upper = _NORMAL.cdf((s.d - margin) / s.facing(margin))  # H0: d >= margin
    p_above_lower = _NORMAL.cdf((-margin - s.d) / s.facing(-margin))  # H0: d <= -margin
    one = {"both": max(p_below_upper, p_above_lower), "upper": p_below_upper, "lower": p_above_lower}[sides]
    return min(1.0, 2.0 * one)


def p_point(s: Spread) -> float:
    """Two-sided p of the point null d = 0, from the half of the interval that faces 0."""
    if s.d == 0.0:
        return 1.0
    return min(1.0, 2.0 * _sf(abs(s.d) / s.facing(0.0)))


def more_units(s: Spread, units: int, margin: float | None, alpha: float, family: int, *,
               material: bool, sides: Sides, can_be_inside: bool = True, can_be_outside: bool = True) -> int | None:
    """More units that would likely settle this metric if the observed difference and spread held (se ~ 1/sqrt(n)).

    The fewer of: units for the equivalence test to pass (|d| inside the margin), or for the margin test (the point
    test when ``material``) to reach Holm's level at its worst rank. None when neither can happen at this estimate
    (``can_be_outside`` False: a figure that cannot show a difference, e.g. agreement against a perfect 1, is
    settled only by the equivalence test).
    """
    if units <= 0:
        return None
    needs: list[float] = []
    z_out = _NORMAL.inv_cdf(1 - alpha / (2 * max(family, 1)))
    if margin is not None and abs(s.d) < margin and can_be_inside:
        toward = margin if (s.d >= 0 or sides == "upper") and sides != "lower" else -margin
        needs.append(units * (_NORMAL.inv_cdf(1 - alpha / 2) * s.facing(toward) / (margin - abs(s.d))) ** 2)
    if material and s.d != 0.0:
        needs.append(units * (z_out * s.facing(0.0) / abs(s.d)) ** 2)
    elif (can_be_outside and margin is not None and abs(s.d) > margin
          and (sides == "both" or (s.d > 0) == (sides == "upper"))):
        needs.append(units * (z_out * s.facing(math.copysign(margin, s.d)) / (abs(s.d) - margin)) ** 2)
    if not needs:
        return None
    return max(1, math.ceil(min(needs) - units))
