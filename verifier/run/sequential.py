"""``--sequential``: an anytime-valid decision per headline at every look, and when an endpoint may stop.

Why: a fixed-n verdict judged again after every batch of cases is wrong (peeking, issue 38); here every decision is
a first crossing of a test supermartingale (:mod:`verifier.stats.sequential`), so its error bound holds at whatever
look the run stops. A headline's units are per-case paired differences, candidate minus reference, in [-1, 1], in the
run's seeded case order (so every prefix is a random sample of the suite). At each look a headline is

* ``differs``: the confidence sequence lies outside ``+-margin`` (both one-sided tests at the margin reject), at
  ``alpha / k`` (Bonferroni across the endpoint's ``k`` headlines: Holm's step-down has no simple anytime-valid
  form); for an always-material metric (forced-call success) half of that goes to the confidence sequence and
  half to the e-process of the point null "no difference" (a sign test on the cases where the two differ);
* ``consistent``: both one-sided tests "difference >= margin" and "<= -margin" have rejected at ``alpha`` each (an
  intersection-union test: no correction needed, the endpoint is consistent only if every headline is);
* ``open``: neither yet. Fewer than ``min_units`` units never settle anything.

Trigger F1 and argument agreement are judged against the reference's own floor (its second answers to a share of
the cases): :mod:`verifier.run.sequential_floor`, the same margins and levels on a union of two confidence
sequences. A decision is the first look where one of these happens, and it is kept: the runner stops an endpoint at the
first look where its verdict is settled (a headline ``differs``, or every headline is ``consistent``). Everything
is a pure function of the ordered units and the look schedule, so ``--resume`` replays the same decisions and stops
at the same case.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from verifier.run.sequential_floor import FloorHeadlineUnits, judge_floor_headline
from verifier.run.sequential_policy import SequentialPolicy, first_settled
from verifier.run.summary import SequentialHeadline
from verifier.stats.sequential import anytime_p, betting_cs, betting_log_capital, mcnemar_mixture_e

LOOK_EVERY = 50


@dataclass
class HeadlineUnits:
    """One headline's paired per-case differences in draw order, and the 1-based draw position of each case."""

    metric: str
    units: np.ndarray  # candidate minus reference, per case, in [-1, 1]
    positions: np.ndarray  # position of each unit's case in the run's case order (ascending)


def look_schedule(sent: int, look_every: int, total: int) -> list[int]:
    """The looks (cases sent) up to ``sent``: every ``look_every`` cases, and the suite's end."""
    looks = list(range(look_every, min(sent, total) + 1, look_every))
    if sent >= total and (not looks or looks[-1] != total):
        looks.append(total)
    return looks


def judge_headline(h: HeadlineUnits, policy: SequentialPolicy, k: int, looks: Sequence[int], *,
                   interval: bool = True) -> SequentialHeadline:
    """The first look at which ``h`` settles (or ``open``), with its confidence sequence there (``interval=False``
    leaves it out: simulations need only the decision)."""
    margin = policy.margins.get(h.metric, 0.0)
    material = h.metric in policy.always_material
    n_at = np.searchsorted(h.positions, np.asarray(looks, dtype=int), side="right")
    usable = n_at >= policy.units_needed(h.metric)
    a_differs = policy.alpha / max(1, k)
    a_cs = a_differs / 2 if material else a_differs
    if not usable.any():
        return SequentialHeadline(metric=h.metric, status="open", units=int(n_at[-1]) if len(n_at) else 0,
                                  margin=margin)
    idx = n_at[usable]
    x = h.units[: int(idx.max())]
    side_cut, cons_cut = math.log(2 / a_cs), math.log(1 / policy.alpha)
    above = betting_log_capital(x, margin, +1, idx) >= side_cut  # rejects "difference <= +margin"
    below = betting_log_capital(x, -margin, -1, idx) >= side_cut  # rejects "difference >= -margin"
    differs = np.maximum.accumulate(above | below)
    p_value = None
    if material:
        nonzero = np.cumsum(x != 0)[idx - 1]
        plus = np.cumsum(x > 0)[idx - 1]
        e = mcnemar_mixture_e(plus, nonzero)
        differs |= np.maximum.accumulate(e >= 2 / a_differs)
    consistent = (np.maximum.accumulate(betting_log_capital(x, margin, -1, idx) >= cons_cut)
                  & np.maximum.accumulate(betting_log_capital(x, -margin, +1, idx) >= cons_cut))
    at, status = first_settled(differs, consistent)
    j = len(idx) - 1 if at is None else at
    n = int(idx[j])
    if material:
        p_value = anytime_p(e[: j + 1])
    low, high = betting_cs(h.units[:n], a_cs) if interval else (None, None)
    return SequentialHeadline(metric=h.metric, status=status, units=n, estimate=float(np.mean(h.units[:n])),
                              low=low, high=high, margin=margin, p_value=p_value,
                              settled_at=None if at is None else int(np.asarray(looks)[usable][at]))


def judge_any(h: HeadlineUnits | FloorHeadlineUnits, policy: SequentialPolicy, k: int, looks: Sequence[int], *,
              interval: bool = True) -> SequentialHeadline:
    """A paired-difference headline here; one judged against the reference's floor in
    :mod:`verifier.run.sequential_floor`."""
    if isinstance(h, FloorHeadlineUnits):
        return judge_floor_headline(h, policy, k, looks, interval=interval)
    return judge_headline(h, policy, k, looks, interval=interval)


def judge_endpoint(headlines: Sequence[HeadlineUnits | FloorHeadlineUnits], policy: SequentialPolicy,
                   looks: Sequence[int]) -> tuple[int | None, list[SequentialHeadline]]:
    """Each headline's decision, and the look (cases sent) at which the endpoint's verdict was settled (None: not yet).

    The verdict is settled at the first look where a headline ``differs`` (a kept decision at ``alpha / k``: no later
    case can make the endpoint anything but ``differs``, so the cases still to come would buy nothing), or else at
    the look where every headline is ``consistent``. Headlines still open at a ``differs`` stop stay ``open``.
    ``k``, the Bonferroni count of the differs level, is every headline of the endpoint, floor-judged ones included.
    An endpoint with no headline at all (nothing measurable yet) is never settled.
    """
    if not looks:
        return None, [SequentialHeadline(metric=h.metric, status="open", units=0) for h in headlines]
    judged = [judge_any(h, policy, len(headlines), looks) for h in headlines]
    differs_at = [j.settled_at for j in judged if j.status == "differs" and j.settled_at is not None]
    if differs_at:
        return min(differs_at), judged
    if not judged or any(j.settled_at is None for j in judged):
        return None, judged
    return max(j.settled_at or 0 for j in judged), judged
