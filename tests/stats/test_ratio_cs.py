"""Confidence sequences for a ratio of means by betting (:mod:`verifier.stats.ratio_cs`): a closed form, coverage at
every look, and the F1 linearisation by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verifier.stats.ratio_cs as rc
from verifier.stats.ratio_cs import counts_at, log_capital, ratio_bounds, ratio_cs, running


def test_lower_bound_of_all_successes_matches_the_closed_form_of_one_bet(monkeypatch) -> None:
    """With one bet g and n successes the capital against "mean <= r" is (1 + g (1/r - 1))^n, so the lower bound
    solves it equal to 1/level: r = g / ((1/level)^(1/n) - 1 + g). And no betting bound beats the exact
    Clopper-Pearson one, level^(1/n)."""
    monkeypatch.setattr(rc, "BET_GRID", np.array([0.9]))
    for n in (30, 100, 400):
        low, high = ratio_cs(np.ones(n), np.ones(n), 0.05)
        c = 40.0 ** (1 / n)  # one side at alpha / 2 = 0.025
        assert low == pytest.approx(0.9 / (c - 1 + 0.9), abs=1e-5)
        assert low <= 0.025 ** (1 / n) and high == 1.0


def test_f1_linearisation_by_hand() -> None:
    """Three cases (tp, fp, fn) = (1,0,0), (0,1,0), (1,0,0): F1 = 4 / 5. Against "F1 <= r" at r = 0.5 a bet g
    multiplies the capital by 1 + g (a / r - b) per case, a = tp, b = (2 tp + fp + fn) / 2; at r = F1 the linearised
    mean is 0, so the capital cannot grow there."""
    a, b = np.array([1.0, 0.0, 1.0]), np.array([1.0, 0.5, 1.0])
    A, B, C = counts_at(a, b, np.array([3]))
    g = rc.BET_GRID
    by_hand = np.log(np.mean((1 + g * (1 / 0.5 - 1)) ** 2 * (1 + g * (0 - 0.5))))
    assert float(log_capital(A, B, C, np.array([0.5]), +1)[0]) == pytest.approx(by_hand, rel=1e-12)
    assert float(log_capital(A, B, C, np.array([0.8]), +1)[0]) <= 0.0
    assert float(log_capital(A, B, C, np.array([0.8]), -1)[0]) <= 0.0


@pytest.mark.slow
def test_ratio_confidence_sequence_covers_at_every_look() -> None:
    """300 paths of 2,000 cases of a trigger-like F1 (a third of the cases ambiguous), looks every 50: the share
    of paths whose running interval ever misses the true F1 stays below alpha (Ville), at each of two levels."""
    rng = np.random.default_rng(11)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        p = np.where(rng.random(n) < 0.3, 0.5, np.where(rng.random(n) < 0.6, 1.0, 0.0))
        t, c = rng.random(n) < p, rng.random(n) < p
        tp, fp, fn = t & c, c & ~t, t & ~c
        return tp * 1.0, (2 * tp + fp + fn) / 2.0

    # population F1: 2 E[tp] / (2 E[tp] + E[fp] + E[fn]) for p in {1 (0.42), 0 (0.28), 1/2 (0.3)}
    tp, fp = 0.42 + 0.3 * 0.25, 0.3 * 0.25
    truth = 2 * tp / (2 * tp + 2 * fp)
    looks = np.arange(50, 2001, 50)
    alphas = np.array([0.05, 0.2])
    miss, runs = np.zeros(2), 300
    for _ in range(runs):
        a, b = draw(2000)
        A, B, C = counts_at(a, b, looks)
        low, high = running(*ratio_bounds(A, B, C, np.log(2 / alphas)))
        miss += ((low > truth) | (high < truth)).any(axis=1)
    assert (miss / runs <= alphas).all(), miss
    a, b = draw(400_000)
    assert math.isclose(truth, a.sum() / b.sum(), abs_tol=3e-3)  # the formula is the population F1
