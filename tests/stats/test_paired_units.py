"""Exact sign-flip test and score intervals on paired units (verifier.stats.paired_units)."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest
from scipy.stats import binomtest

from verifier.stats.intervals import newcombe_paired_diff
from verifier.stats.paired_units import paired_score_diff, sign_flip_p, unit_mean_rate


def brute_force_p(diffs: list[Fraction]) -> float:
    """P(|sum of randomly signed differences| >= |observed sum|), by listing every sign pattern."""
    observed = abs(sum(diffs))
    hits = sum(abs(sum(s * d for s, d in zip(signs, diffs))) >= observed
               for signs in itertools.product((1, -1), repeat=len(diffs)))
    return hits / 2 ** len(diffs)


def test_sign_flip_on_zero_one_outcomes_is_the_exact_sign_test() -> None:
    # one trial per unit: differences -1 / 0 / +1, the test must be exact McNemar on the discordant units
    for down, up, ties in [(12, 0, 0), (8, 0, 4), (3, 1, 8), (5, 5, 2), (0, 1, 3), (9, 2, 1)]:
        diffs = [Fraction(-1)] * down + [Fraction(1)] * up + [Fraction(0)] * ties
        expected = binomtest(up, down + up, 0.5).pvalue
        assert sign_flip_p(diffs) == pytest.approx(expected, rel=1e-12)
    assert sign_flip_p([Fraction(0)] * 5) == 1.0
    # a candidate failing all 12 tasks the reference solves: 2 / 4096
    assert sign_flip_p([-1] * 12) == pytest.approx(2 / 4096)


def test_sign_flip_with_several_trials_matches_enumeration() -> None:
    rng = random.Random(3)
    for _ in range(30):
        m = rng.randint(1, 10)
        trials = [rng.randint(1, 4) for _ in range(m)]
        diffs = [Fraction(rng.randint(-t, t), t) for t in trials]
        assert sign_flip_p(diffs) == pytest.approx(brute_force_p(diffs), abs=1e-12)
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        sign_flip_p([Fraction(3, 2)])


def test_sign_flip_on_a_support_too_large_to_list_is_sampled_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import verifier.stats.paired_units as pu

    diffs = [Fraction(-1)] * 9 + [Fraction(1, 3)] * 3 + [Fraction(0)] * 2
    exact = sign_flip_p(diffs)
    monkeypatch.setattr(pu, "_MAX_SUPPORT", 1)  # force the sampled path on a case we can list exactly
    sampled = sign_flip_p(diffs)
    assert sampled == pytest.approx(exact, abs=0.003) and sampled > 0


def test_score_interval_equals_newcombe_on_zero_one_outcomes() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 30)
        a = [rng.random() < 0.7 for _ in range(n)]
        b = [x if rng.random() < 0.6 else rng.random() < 0.5 for x in a]
        mine = paired_score_diff([float(x) for x in a], [float(y) for y in b])
        ref = newcombe_paired_diff(a, b)
        assert (mine.value, mine.low, mine.high) == pytest.approx((ref.value, ref.low, ref.high), abs=1e-12)


def test_agreement_is_never_a_zero_width_interval() -> None:
    for n in (1, 4, 12, 40):
        for level in (0.0, 1.0):
            iv = paired_score_diff([level] * n, [level] * n)
            assert iv.value == 0.0 and iv.low < 0.0 < iv.high, (n, level, iv)
    four = paired_score_diff([1.0] * 4, [1.0] * 4)
    assert four.high - four.low > 0.9  # four agreeing scenarios rule out little: about +-49 points
    twelve = paired_score_diff([1.0] * 12, [1.0] * 12)
    assert 0.2 < twelve.high < 0.3 and twelve.n == 12


def test_losing_every_task_is_an_interval_far_from_zero() -> None:
    iv = paired_score_diff([1.0] * 12, [0.0] * 12)
    assert iv.value == -1.0 and iv.low == -1.0 and iv.high < -0.6


def test_unit_mean_rate_is_wilson_on_units() -> None:
    iv = unit_mean_rate([1.0, 1.0, 1.0, 1.0])
    assert iv.value == 1.0 and iv.high == 1.0 and iv.low == pytest.approx(0.5101, abs=1e-4) and iv.n == 4
    frac = unit_mean_rate([0.5, 1.0, 2 / 3])
    assert frac.value == pytest.approx(13 / 18) and frac.low < frac.value < frac.high and frac.n == 3
    assert unit_mean_rate([]).value is None
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        unit_mean_rate([1.5])
