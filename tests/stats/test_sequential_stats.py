"""The anytime-valid statistics: a published example, and coverage that holds at every look (Ville's inequality)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from verifier.stats.sequential import (
    anytime_p,
    betting_cs,
    betting_log_capital,
    mcnemar_mixture_e,
    rejects,
)


def test_mixture_e_value_reproduces_lindleys_births_example() -> None:
    """Lindley's paradox (Lindley 1957; the births example in its Wikipedia article): 49,581 boys of 98,451 births.
    The two-sided test gives p ~ 0.0235, yet the Bayes factor with a uniform prior favours a fair coin: the
    posterior probability of H0 at prior odds 1:1 is ~0.95. Our Beta(1, 1) mixture e-value is that Bayes factor."""
    e = float(mcnemar_mixture_e(49_581, 98_451))
    assert 1 / (1 + e) == pytest.approx(0.95, abs=0.001)  # the published figure
    assert e == pytest.approx(1 / (98_451 + 1) / binom.pmf(49_581, 98_451, 0.5), rel=1e-9)  # closed form
    assert anytime_p(np.array([e])) == 1.0  # no evidence against a fair coin, where the fixed-n p says 0.0235


def test_mixture_e_value_is_a_fair_bet_under_the_null() -> None:
    """E[e_n] = 1 exactly under a fair coin (a martingale), for every n: summed over the binomial pmf."""
    for n in (1, 7, 50, 400):
        k = np.arange(n + 1)
        assert float(np.sum(binom.pmf(k, n, 0.5) * mcnemar_mixture_e(k, n))) == pytest.approx(1.0, rel=1e-9)
        assert float(np.sum(binom.pmf(k, n, 0.5) * mcnemar_mixture_e(k, n, a=0.5))) == pytest.approx(1.0, rel=1e-9)


def test_betting_capital_by_hand() -> None:
    """Three observations, grid-averaged capital prod(1 + lam (x - m)) computed by hand for the first grid bet."""
    from verifier.stats.sequential import BET_GRID

    x = np.array([1.0, 0.0, -0.5])
    m = 0.1
    lam = BET_GRID / (1 + m)
    by_hand = np.log(np.mean((1 + lam * 0.9) * (1 - lam * 0.1) * (1 - lam * 0.6)))
    assert betting_log_capital(x, m, +1)[-1] == pytest.approx(by_hand, rel=1e-12)


def _miss_any_look(x: np.ndarray, mu: float, alpha: float, looks: np.ndarray) -> bool:
    cut = math.log(2 / alpha)
    return bool((betting_log_capital(x, mu, +1, looks) >= cut).any()
                or (betting_log_capital(x, mu, -1, looks) >= cut).any())


def test_confidence_sequence_covers_at_every_look_and_a_per_look_interval_does_not() -> None:
    """500 paths of 2,000 bounded values (a skewed three-point law), looks every 50: the confidence sequence
    misses the true mean at ANY look in at most alpha of the paths; the per-look 95 % normal interval (the
    fixed-n method, peeked at 40 times) misses far more often: this is what the test would catch."""
    rng = np.random.default_rng(40)
    alpha, looks = 0.05, np.arange(50, 2001, 50)
    vals, probs = np.array([-1.0, 0.0, 1.0]), np.array([0.12, 0.8, 0.08])
    mu = float(vals @ probs)
    cs_miss = naive_miss = 0
    for _ in range(500):
        x = rng.choice(vals, p=probs, size=2000)
        cs_miss += _miss_any_look(x, mu, alpha, looks)
        means = np.cumsum(x)[looks - 1] / looks
        sd = np.array([x[:n].std(ddof=1) for n in looks])
        naive_miss += bool((np.abs(means - mu) > 1.96 * sd / np.sqrt(looks)).any())
    assert cs_miss / 500 <= alpha
    assert naive_miss / 500 > 2 * alpha


def test_betting_cs_is_the_set_the_one_sided_tests_keep() -> None:
    rng = np.random.default_rng(3)
    x = rng.choice([-1.0, 0.0, 1.0], p=[0.1, 0.85, 0.05], size=600)
    low, high = betting_cs(x, 0.05)
    assert low < x.mean() < high and high - low < 0.2
    assert rejects(x, low - 0.01, +1, 0.025) and not rejects(x, low + 0.01, +1, 0.025)
    assert rejects(x, high + 0.01, -1, 0.025) and not rejects(x, high - 0.01, -1, 0.025)
    assert betting_cs(np.array([]), 0.05) == (-1.0, 1.0)
