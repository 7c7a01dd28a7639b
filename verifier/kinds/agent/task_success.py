"""Agent task success and its comparison with the reference, on scenarios as the independent unit.

Why scenarios: trials of one scenario share its world and its difficulty, so they are not independent; what a
verdict can generalise from is the number of scenarios. Everything here therefore folds trials into one success
share per scenario first:

* task success (and pass^1, the same quantity) is the mean of the per-scenario shares with a Wilson interval on
  n = scenarios (:func:`verifier.stats.paired_units.unit_mean_rate`); with one trial per scenario this is the plain
  Wilson interval of solved tasks;
* the comparison pairs trials by (scenario, trial), takes each scenario's paired shares, and reports the difference
  (candidate - reference) with Newcombe's score interval for paired proportions and the exact sign-flip test across
  scenarios (:mod:`verifier.stats.paired_units`). Neither collapses when every scenario agrees: a zero spread is not
  a zero-width interval, and a candidate that fails every task the reference solves gets the exact p-value
  ``2 * 0.5 ** m`` for its ``m`` lost scenarios, not "no p-value".

The verdict reads ``comparisons["task_success"]``: ``difference`` (an Interval, n = scenarios), ``p_value``,
``test`` = ``sign_flip_exact``, ``unit`` = ``scenarios`` and ``independent_units`` = the number of paired scenarios.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Protocol

from verifier.records import Interval
from verifier.run.summary import Comparison
from verifier.stats.paired_units import SIGN_FLIP_TEST, paired_score_diff, sign_flip_p, unit_mean_rate

UNIT = "scenarios"


class ScoredTrial(Protocol):
    """What this module needs of a trial (``scoring.Trial`` has it)."""

    scenario: str
    trial: int
    success: bool


def per_scenario(trials: Sequence[ScoredTrial]) -> dict[str, list[bool]]:
    """Success flags of each scenario's trials, in trial order."""
    out: dict[str, list[tuple[int, bool]]] = defaultdict(list)
    for t in trials:
        out[t.scenario].append((t.trial, t.success))
    return {s: [ok for _, ok in sorted(v)] for s, v in sorted(out.items())}


def success_rate(by_scenario: Mapping[str, Sequence[bool]]) -> Interval:
    """Task success: mean over scenarios of each scenario's solved share, Wilson interval on n = scenarios."""
    shares = [sum(v) / len(v) for v in by_scenario.values() if v]
    return unit_mean_rate(shares)


def compare_task_success(pairs: Sequence[tuple[ScoredTrial, ScoredTrial]]) -> Comparison | None:
    """Candidate minus reference task success on (reference, candidate) trials paired by (scenario, trial).

    None when there is no pair. Each scenario weighs the same whatever its number of paired trials.
    """
    by_scenario: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for ref, cand in pairs:
        if (ref.scenario, ref.trial) != (cand.scenario, cand.trial):
            raise ValueError(f"unpaired trials: reference {ref.scenario}#{ref.trial}, "
                             f"candidate {cand.scenario}#{cand.trial}")
        by_scenario[ref.scenario].append((ref.success, cand.success))
    if not by_scenario:
        return None
    ref_shares, cand_shares, diffs = [], [], []
    for flags in by_scenario.values():
        n = len(flags)
        r, c = sum(a for a, _ in flags), sum(b for _, b in flags)
        ref_shares.append(r / n)
        cand_shares.append(c / n)
        diffs.append(Fraction(c - r, n))
    return Comparison(
        metric="task_success",
        difference=paired_score_diff(ref_shares, cand_shares),
        p_value=sign_flip_p(diffs),
        test=SIGN_FLIP_TEST,
        unit=UNIT,
        independent_units=len(by_scenario),
    )
