"""Statistics against published values and against properties that must hold."""

from __future__ import annotations

import math

import pytest

from verifier.stats import intervals as stats


def test_wilson_matches_newcombe_1998_single_proportion_examples() -> None:
    # Newcombe (1998, Stat Med 17:857) Table I, Wilson score method.
    for k, n, lo, hi in [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611),
                         (1, 29, 0.0061, 0.1718)]:
        iv = stats.wilson(k, n)
        assert iv.value == pytest.approx(k / n)
        assert iv.low == pytest.approx(lo, abs=1e-4)
        assert iv.high == pytest.approx(hi, abs=1e-4)
        assert iv.n == n and iv.method == "wilson"


def test_wilson_zero_denominator_is_unknown_not_zero() -> None:
    iv = stats.wilson(0, 0)
    assert iv.value is None and iv.low is None and iv.n == 0


def test_wilson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        stats.wilson(5, 3)


def test_newcombe_unpaired_matches_published_example() -> None:
    # Newcombe (1998, Stat Med 17:873), 56/70 vs 48/80, method 10: 0.0524 to 0.3339.
    iv = stats.newcombe_unpaired_diff(48, 80, 56, 70)
    assert iv.value == pytest.approx(0.2)
    assert iv.low == pytest.approx(0.0524, abs=1e-4)
    assert iv.high == pytest.approx(0.3339, abs=1e-4)


def _pairs(n11: int, n10: int, n01: int, n00: int) -> tuple[list[bool], list[bool]]:
    a = [True] * n11 + [True] * n10 + [False] * n01 + [False] * n00
    b = [True] * n11 + [False] * n10 + [True] * n01 + [False] * n00
    return a, b


def test_newcombe_paired_altman_table_6_2() -> None:
    # Altman et al., Statistics with Confidence (2000), Table 6.2: [[14, 5], [0, 22]]:
    # difference 0.122, 95% CI 0.011 to 0.226 (Newcombe method 10).
    first, second = _pairs(14, 5, 0, 22)
    iv = stats.newcombe_paired_diff(second, first)  # first - second
    assert iv.value == pytest.approx(5 / 41)
    assert iv.low == pytest.approx(0.011, abs=6e-4)
    assert iv.high == pytest.approx(0.226, abs=6e-4)


def test_newcombe_paired_is_antisymmetric_and_contains_estimate() -> None:
    a, b = _pairs(30, 7, 2, 11)
    fwd = stats.newcombe_paired_diff(a, b)
    rev = stats.newcombe_paired_diff(b, a)
    assert fwd.value == pytest.approx(-rev.value)
    assert fwd.low == pytest.approx(-rev.high) and fwd.high == pytest.approx(-rev.low)
    assert fwd.low < fwd.value < fwd.high
    assert fwd.value == pytest.approx((32 - 37) / 50)


def test_newcombe_paired_narrower_than_unpaired_when_correlated() -> None:
    a, b = _pairs(60, 3, 8, 29)
    paired = stats.newcombe_paired_diff(a, b)
    unpaired = stats.newcombe_unpaired_diff(63, 100, 68, 100)
    assert paired.value == pytest.approx(unpaired.value)
    assert (paired.high - paired.low) < (unpaired.high - unpaired.low)


def test_mcnemar_exact_values() -> None:
    a, b = _pairs(10, 5, 0, 10)
    assert stats.mcnemar(a, b) == pytest.approx(2 * 0.5**5)  # 0.0625
    a, b = _pairs(10, 3, 3, 10)
    assert stats.mcnemar(a, b) == pytest.approx(1.0)
    a, b = _pairs(4, 0, 0, 4)
    assert stats.mcnemar(a, b) == 1.0
    a, b = _pairs(0, 1, 9, 0)
    assert stats.mcnemar(a, b) == pytest.approx(2 * (1 + 10) / 2**10)


def test_paired_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="length"):
        stats.mcnemar([True], [True, False])


def test_percentiles_keys_and_values() -> None:
    out = stats.percentiles([1, 2, 3, 4, 5], [50, 95, 99.9])
    assert out == {"p50": 3.0, "p95": pytest.approx(4.8), "p99.9": pytest.approx(4.996)}
    assert stats.percentiles([], [50]) == {}
    with pytest.raises(ValueError):
        stats.percentiles([1.0], [150])


def test_bootstrap_mean_is_deterministic_and_covers() -> None:
    vals = [float(i % 7) for i in range(200)]
    one = stats.bootstrap_mean(vals, seed=3)
    two = stats.bootstrap_mean(vals, seed=3)
    assert one == two
    assert one.value == pytest.approx(sum(vals) / 200)
    se = math.sqrt(sum((v - one.value) ** 2 for v in vals) / 199 / 200)
    # percentile bootstrap half-width ~ 1.96 se for a near-normal mean
    assert (one.high - one.low) / 2 == pytest.approx(1.96 * se, rel=0.15)


def test_cluster_bootstrap_is_wider_when_clusters_are_correlated() -> None:
    # 10 clusters of 20 identical values: effectively n = 10, not 200.
    vals = [float(c) for c in range(10) for _ in range(20)]
    clusters = [c for c in range(10) for _ in range(20)]
    naive = stats.bootstrap_mean(vals)
    clustered = stats.bootstrap_mean(vals, clusters=clusters)
    assert clustered.value == naive.value
    assert (clustered.high - clustered.low) > 3 * (naive.high - naive.low)
    assert clustered.method == "cluster_bootstrap"


def test_cluster_robust_diff_hand_computed() -> None:
    # d = b - a = [1, 2, 3, 4] in clusters {1,2}, {3,4}: mean 2.5, cluster residual sums -2, +2,
    # CR1 var = (2/1) * 8 / 16 = 1, se = 1, t(0.975, df=1) = 12.7062.
    iv = stats.cluster_robust_diff([0, 0, 0, 0], [1, 2, 3, 4], [1, 1, 2, 2])
    assert iv.value == pytest.approx(2.5)
    assert iv.low == pytest.approx(2.5 - 12.7062047, abs=1e-6)
    assert iv.high == pytest.approx(2.5 + 12.7062047, abs=1e-6)
    one_cluster = stats.cluster_robust_diff([0, 0], [1, 2], ["x", "x"])
    assert one_cluster.low is None and one_cluster.value == pytest.approx(1.5)


def test_paired_bootstrap_diff_sign() -> None:
    iv = stats.paired_bootstrap_diff([1.0] * 50, [1.5] * 25 + [2.5] * 25)
    assert iv.value == pytest.approx(1.0)
    assert iv.low > 0.5


def test_cluster_robust_p_matches_t_test() -> None:
    # d = [1, 2, 3, 4] in clusters {1,2}, {3,4}: t = 2.5 / 1 on 1 df -> p = 2 * sf(2.5, 1) = 0.24223
    assert stats.cluster_robust_p([0, 0, 0, 0], [1, 2, 3, 4], [1, 1, 2, 2]) == pytest.approx(0.2422, abs=1e-4)
    assert stats.cluster_robust_p([0, 0], [0, 0], ["a", "b"]) == 1.0
    assert stats.cluster_robust_p([0, 0], [1, 1], ["a", "a"]) is None
