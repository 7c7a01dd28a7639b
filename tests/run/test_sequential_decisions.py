"""``--sequential`` decisions on simulated paired outcomes: error rates that hold however often one looks, and the
naive alternative (a fixed-n test at every look) that does not.

Simulations use :class:`verifier.testing.sequential_sim.PairedModel` (easy and hard cases, independent answers);
each path is 2,000 cases judged every 50 (40 looks), as the default plan of issue 40.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom, norm

from verifier.run.sequential import HeadlineUnits, SequentialPolicy, judge_endpoint, judge_headline, look_schedule
from verifier.testing.sequential_sim import PairedModel, sequential_once

N, EVERY, ALPHA = 2000, 50, 0.05
LOOKS = np.arange(EVERY, N + 1, EVERY)


def _naive_mcnemar_ever(x: np.ndarray) -> bool:
    """Exact McNemar (two-sided binomial on discordant pairs) at every look: 'differs' the first time p < alpha."""
    plus, nonzero = np.cumsum(x > 0)[LOOKS - 1], np.cumsum(x != 0)[LOOKS - 1]
    lo = np.minimum(plus, nonzero - plus)
    p = np.minimum(1.0, 2 * binom.cdf(lo, nonzero, 0.5))
    return bool((p[nonzero > 0] < ALPHA).any())


def _naive_tost_ever(x: np.ndarray, margin: float) -> bool:
    """The fixed-n equivalence test (TOST, normal approximation) at every look: 'consistent' the first time."""
    z = norm.ppf(1 - ALPHA)
    for n in LOOKS:
        d, se = x[:n].mean(), x[:n].std(ddof=1) / np.sqrt(n)
        if se > 0 and d - z * se > -margin and d + z * se < margin:
            return True
    return False


def test_aa_point_null_false_differs_at_most_alpha_over_40_looks_where_naive_peeking_is_not() -> None:
    """A/A on an always-material metric with (almost) no margin, so the run never stops as 'consistent' and every
    one of the 40 looks is a chance for a false 'differs': the e-process plus confidence sequence stay <= alpha;
    the exact McNemar test at every look (peeking) goes well past it."""
    policy = SequentialPolicy(alpha=ALPHA, margins={"forced_call_success": 1e-9})
    rng = np.random.default_rng(2026)
    model, runs = PairedModel(base=0.9, hard_share=0.4), 400
    seq = naive = 0
    for _ in range(runs):
        x = model.draw(N, rng)
        seq += sequential_once(x, policy, "forced_call_success", EVERY)[0] == "differs"
        naive += _naive_mcnemar_ever(x)
    assert seq / runs <= ALPHA
    assert naive / runs > 2 * ALPHA  # peeking a fixed-n test 40 times: ~4x the stated error rate


def test_false_consistent_at_the_margin_at_most_alpha_where_naive_tost_peeking_is_not() -> None:
    """Candidate exactly 5 points worse (the schema margin): a 'consistent' is wrong. Sequential: <= alpha.
    The fixed-n TOST judged at every look: far more."""
    policy = SequentialPolicy.from_verdict()
    rng = np.random.default_rng(38)
    model, runs = PairedModel(shift=-0.05), 400
    seq = naive = 0
    for _ in range(runs):
        x = model.draw(N, rng)
        seq += sequential_once(x, policy, "schema_accuracy", EVERY)[0] == "consistent"
        naive += _naive_tost_ever(x, 0.05)
    assert seq / runs <= ALPHA
    assert naive / runs > 2 * ALPHA


def test_clearly_different_candidate_stops_early_and_is_named() -> None:
    policy = SequentialPolicy.from_verdict()
    rng = np.random.default_rng(7)
    res = [sequential_once(PairedModel(shift=-0.10).draw(N, rng), policy, "schema_accuracy", EVERY)
           for _ in range(100)]
    assert sum(s == "differs" for s, _ in res) >= 95
    assert np.mean([n for _, n in res]) < N / 2


def test_clearly_consistent_candidate_stops_early_as_consistent() -> None:
    policy = SequentialPolicy.from_verdict()
    rng = np.random.default_rng(8)
    res = [sequential_once(PairedModel(shift=0.0).draw(N, rng), policy, "schema_accuracy", EVERY) for _ in range(100)]
    assert sum(s == "consistent" for s, _ in res) >= 95
    assert np.mean([n for _, n in res]) < N / 2


def test_endpoint_settles_only_when_every_headline_has_and_bonferroni_splits_differs() -> None:
    rng = np.random.default_rng(1)
    policy = SequentialPolicy.from_verdict()
    same = PairedModel().draw(N, rng).astype(float)
    pos = np.arange(1, N + 1)
    few = HeadlineUnits("forced_call_success", np.zeros(5), np.array([3, 9, 40, 70, 90]))  # never 10 units
    at, heads = judge_endpoint([HeadlineUnits("schema_accuracy", same, pos), few], policy, look_schedule(N, EVERY, N))
    assert at is None and heads[0].status == "consistent" and heads[1].status == "open"
    h = HeadlineUnits("schema_accuracy", same, pos)
    looks = look_schedule(N, EVERY, N)
    one, two = judge_headline(h, policy, 1, looks), judge_headline(h, policy, 2, looks)
    assert one.low is not None and two.low is not None and two.low <= one.low  # alpha / 2: a wider sequence
    assert look_schedule(120, 50, 120) == [50, 100, 120] and look_schedule(90, 50, 1000) == [50]
