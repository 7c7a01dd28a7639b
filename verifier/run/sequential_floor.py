"""``--sequential`` for the headlines judged against the reference's own floor: trigger F1 and argument agreement.

Why a rule of its own: these differences are ``theta_c - theta_f``, the candidate's agreement with the reference's
first answers (every case) minus the reference's second answers' agreement with its first (the floor: only the
cases it answers twice, half of them by default, :mod:`verifier.kinds.toolcall.reference_repeats`). There is no
per-case paired difference to bet on (most cases have no second answer), and the floor is the scarcer, noisier half:
a decision that took the floor's point estimate as known would call an A/A twin ``differs`` whenever its few
repeated cases happened to agree more or less than usual (tests/run/test_sequential_floor.py breaks it so on
purpose).

The choice: **a conservative union of two confidence sequences.** Each of ``theta_c`` and ``theta_f`` gets its own
anytime-valid interval (:mod:`verifier.stats.ratio_cs`: betting on the linearised ratio, so F1 and pooled
agreement are handled without a normal approximation), and the difference's interval is
``[low_c - high_f, high_c - low_f]``. It covers whenever both do, so by a union bound its error is at most the sum
of the four one-sided levels, at every look, without modelling how the two samples are correlated (they share the
reference's first answers on the repeated cases; the union bound needs no independence). Cheaper alternatives
lose validity (paired differences on repeated cases only use a tenth of the candidate's data; a plug-in floor
ignores its uncertainty); sharper ones (a joint betting test on the difference) need the two samples' coupling.

Levels, as :mod:`verifier.run.sequential` spends them for the other headlines:

* ``differs``: the difference's interval outside ``+-margin``, each side of it at ``alpha / (2 k)`` (so the
  two-sided interval is at ``alpha / k``: Bonferroni across the endpoint's ``k`` headlines), a side's level split
  between the floor's bound (:data:`FLOOR_SHARE`, 3/4) and the candidate's (1/4). Never when the run has no
  reference repeats: the floor is then taken as 1, and a shortfall from a perfect 1 is no evidence of a different
  model (the fixed-n verdict's ``can_be_outside``).
* ``consistent``: ``low_c - high_f > -margin`` and ``high_c - low_f < margin``, each side at ``alpha`` split the
  same way (the two sides of the equivalence test, an intersection-union test as for the other headlines).
* units: the fewer of the candidate's cases and the floor's repeated cases (the fixed-n verdict's
  ``independent_units``); below the verdict policy's minimum the headline stays ``open``.

Per-case units (so a prefix of the seeded case order is a random sample of cases): trigger F1 per case is
``a = 2 TP / 2K``, ``b = (2 TP + FP + FN) / 2K`` over its ``K`` paired decisions (F1 = E[a] / E[b], the pooled F1
when every case has as many decisions); argument agreement is the case's share of agreeing calls (``b = 1``), so
per call when a case has one call a side, as schema accuracy in :mod:`verifier.kinds.toolcall.sequential_units`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from verifier.run.sequential_policy import SequentialPolicy, first_settled
from verifier.run.summary import SequentialHeadline
from verifier.stats.ratio_cs import counts_at, ratio_bounds, running, stack

#: Metrics judged against the reference's floor (both in the sequential set since issue 40's follow-up).
FLOOR_METRICS: tuple[str, ...] = ("trigger_f1", "argument_agreement")
#: Share of each one-sided level spent on the floor's bound (the rest on the candidate's): fixed in advance, and
#: most of it to the floor, which has a tenth of the cases (its bound is the wide one; the candidate's barely
#: moves when its level shrinks fourfold).
FLOOR_SHARE = 0.75


@dataclass
class RatioUnits:
    """Per-case ``a`` (numerator) and ``b`` (denominator), ``0 <= a <= b <= 1``, with each case's draw position."""

    num: np.ndarray
    den: np.ndarray
    positions: np.ndarray  # 1-based position of the case in the run's case order (ascending)

    @classmethod
    def empty(cls) -> RatioUnits:
        return cls(np.zeros(0), np.zeros(0), np.zeros(0, dtype=int))


@dataclass
class FloorHeadlineUnits:
    """A headline measured as candidate-vs-reference minus the reference's own floor."""

    metric: str
    candidate: RatioUnits  # candidate vs the reference's first answers, every case
    floor: RatioUnits | None  # reference's second answers vs its first; None: no repeats in this run (floor = 1)

    @property
    def positions(self) -> np.ndarray:
        return self.candidate.positions


def _bounds(sides: list[tuple[RatioUnits, np.ndarray]], cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running bounds (levels x quantities x looks) of each quantity's ratio, each at ``n_at`` units per look, in
    one stacked pass; ``cuts`` (levels x quantities) are log(1 / level)."""
    return running(*ratio_bounds(*stack([counts_at(u.num, u.den, n_at) for u, n_at in sides]), cuts))


def _ratio(u: RatioUnits, n: int) -> float | None:
    d = float(np.sum(u.den[:n]))
    return float(np.sum(u.num[:n])) / d if d > 0 else None


def judge_floor_headline(h: FloorHeadlineUnits, policy: SequentialPolicy, k: int, looks: Sequence[int], *,
                         interval: bool = True) -> SequentialHeadline:
    """The first look at which ``h`` settles (or ``open``), with the difference's interval there at the differs
    level (``interval`` is accepted for symmetry with :func:`verifier.run.sequential.judge_headline`; the bounds
    are the decision itself, so they are always computed)."""
    del interval
    margin = policy.margins.get(h.metric, 0.0)
    at_look = np.asarray(looks, dtype=int)
    n_c = np.searchsorted(h.candidate.positions, at_look, side="right")
    n_f = np.searchsorted(h.floor.positions, at_look, side="right") if h.floor is not None else None
    units = n_c if n_f is None else np.minimum(n_c, n_f)
    usable = units >= policy.units_needed(h.metric)
    if not usable.any():
        return SequentialHeadline(metric=h.metric, status="open", units=int(units[-1]) if len(units) else 0,
                                  margin=margin)
    levels = np.array([policy.alpha / (2 * max(1, k)), policy.alpha])  # per side: differs, consistent
    if h.floor is not None and n_f is not None:
        share = np.array([1 - FLOOR_SHARE, FLOOR_SHARE])
        low, high = _bounds([(h.candidate, n_c), (h.floor, n_f)], np.log(1 / (levels[:, None] * share)))
        (low_c, low_f), (high_c, high_f) = low.transpose(1, 0, 2), high.transpose(1, 0, 2)
    else:  # no repeats: the floor is 1, exactly, and the candidate's bounds get the whole level
        low, high = _bounds([(h.candidate, n_c)], np.log(1 / levels)[:, None])
        low_c, high_c = low[:, 0], high[:, 0]
        low_f = high_f = np.ones_like(low_c)
    low, high = low_c - high_f, high_c - low_f  # (2 levels, looks)
    differs = usable & ((low[0] > margin) | (high[0] < -margin)) & (h.floor is not None)
    consistent = usable & (low[1] > -margin) & (high[1] < margin)
    at, status = first_settled(differs, consistent)
    j = int(np.flatnonzero(usable)[-1]) if at is None else at
    rc = _ratio(h.candidate, int(n_c[j]))
    rf = 1.0 if h.floor is None or n_f is None else _ratio(h.floor, int(n_f[j]))
    estimate = None if rc is None or rf is None else rc - rf
    return SequentialHeadline(metric=h.metric, status=status, units=int(units[j]), estimate=estimate,
                              low=float(low[0, j]), high=float(high[0, j]), margin=margin,
                              settled_at=None if at is None else int(at_look[at]))
