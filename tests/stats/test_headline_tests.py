"""The headline-difference helpers: exact where they claim to be, never a zero-width interval, p and interval agree."""

from __future__ import annotations

import numpy as np
import pytest

from verifier.stats import headline_tests as ht


def test_swap_test_is_exact_on_few_differing_cases() -> None:
    # 3 cases where b has 0 of 2 valid and a 2 of 2, 3 identical: only the 2 one-sided swaps of 8 are as extreme
    k_a, n_a = np.array([2, 2, 2, 2, 2, 2]), np.full(6, 2)
    k_b = np.array([0, 0, 0, 2, 2, 2])
    assert ht.cluster_swap_p(k_a, n_a, k_b, n_a) == pytest.approx(2 / 8)
    assert ht.cluster_swap_p(k_a, n_a, k_a, n_a) == 1.0  # nothing differs: no evidence at all


def test_swap_test_monte_carlo_never_claims_zero() -> None:
    k_a, n_a = np.full(40, 1), np.full(40, 1)
    p = ht.cluster_swap_p(k_a, n_a, np.zeros(40), n_a, n_perm=999)
    assert p == pytest.approx(1 / 1000)


@pytest.mark.parametrize("k,n", [(5, 5), (0, 5), (40, 40)])
def test_score_intervals_keep_width_at_the_edges(k: int, n: int) -> None:
    d = ht.mover(ht.wilson_at(k, n), ht.wilson_at(k, n))(0.95)
    assert d is not None and d[0] == 0 and d[1] < 0 < d[2]
    f1 = ht.jaccard_f1_at(n, 0, 0)(0.95)
    assert f1 is not None and f1[0] == 1 and f1[1] < 1


def test_zero_spread_bootstrap_hulled_with_score_interval_is_not_zero_width() -> None:
    boot = np.zeros(500)
    low, high = ht.hull_interval(boot, ht.mover(ht.wilson_at(10, 10), ht.wilson_at(10, 10)))
    assert low is not None and high is not None and low < 0 < high
    assert ht.percentile_p(boot) == 1.0


def test_hull_p_agrees_with_the_hull_interval() -> None:
    rng = np.random.default_rng(3)
    for _ in range(60):
        ka, kb, n = int(rng.integers(0, 40)), int(rng.integers(0, 40)), 40
        boot = rng.normal((kb - ka) / n, 0.08, size=2000)
        score = ht.mover(ht.wilson_at(kb, n), ht.wilson_at(ka, n))
        low, high = ht.hull_interval(boot, score)
        p = ht.hull_p(boot, score)
        assert low is not None and high is not None
        excludes = not (low <= 0 <= high)
        if abs(p - 0.05) > 0.003:  # away from the bootstrap's own Monte Carlo resolution
            assert (p < 0.05) == excludes, (ka, kb, p, low, high)


def test_stratified_weights_keep_each_stratum_size() -> None:
    strata = np.array([0, 0, 0, 1, 1, 0, 1])
    w = ht.stratified_cluster_weights(strata, 300, seed=1)
    assert w.shape == (300, 7)
    assert np.all(w[:, strata == 1].sum(1) == 3) and np.all(w[:, strata == 0].sum(1) == 4)


def test_stratified_weights_are_kept_read_only_and_equal_a_fresh_draw() -> None:
    """The weights are a pure function of (strata, n_boot, seed): kept ones are the same matrix a fresh draw gives,
    and read-only, so a caller cannot change what the next caller gets."""
    strata = np.array([0, 1] * 50)
    a = ht.stratified_cluster_weights(strata, 200, seed=3)
    assert ht.stratified_cluster_weights(strata, 200, seed=3) is a and not a.flags.writeable
    ht._WEIGHTS.clear()
    assert np.array_equal(ht.stratified_cluster_weights(strata, 200, seed=3), a)
    assert not np.array_equal(ht.stratified_cluster_weights(strata, 200, seed=4), a)
    one = ht.stratified_cluster_weights(np.zeros(40), 100, seed=0)  # one stratum: every replicate draws 40
    assert one.shape == (100, 40) and np.all(one.sum(1) == 40)
