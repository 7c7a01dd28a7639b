"""Agent task success as a headline: honest at a dozen scenarios, calibrated on simulated A/A runs.

The simulations build real ``scoring.Trial`` objects and go through the real ``compare_task_success`` (what
``score_endpoint`` puts in ``comparisons["task_success"]``); one test goes end to end through ``score_records``.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable

import pytest

from suites.agent import builtin_suite
from tests.kinds.agent.test_scoring import trajectory
from verifier.kinds.agent.scoring import Trial, score_records
from verifier.kinds.agent.task_success import compare_task_success
from verifier.stats.multiple import adjust_pvalues

ALPHA = 0.05
HEADLINE_TESTS = 6  # about as many headline tests as the verdict judges per candidate with Holm


def trial(scenario: str, index: int, success: bool, endpoint: str) -> Trial:
    return Trial(endpoint, scenario, index, 0, 10, [], "final_answer", success)


def simulate(ref_p: list[float], cand_p: list[float], trials: int, rng: random.Random) -> list[tuple[Trial, Trial]]:
    """One run: each endpoint solves trial t of scenario s with its own probability, independently."""
    return [
        (trial(f"s{s}", t, rng.random() < rp, "ref"), trial(f"s{s}", t, rng.random() < cp, "cand"))
        for s, (rp, cp) in enumerate(zip(ref_p, cand_p))
        for t in range(trials)
    ]


def test_all_scenarios_agreeing_is_not_a_zero_width_interval() -> None:
    pairs = [(trial(f"s{i}", 0, True, "ref"), trial(f"s{i}", 0, True, "cand")) for i in range(4)]
    cmp = compare_task_success(pairs)
    assert cmp is not None
    iv = cmp.difference
    assert iv.value == 0.0 and iv.low < -0.4 and iv.high > 0.4  # four scenarios cannot rule out +-40 points
    assert cmp.p_value == 1.0 and cmp.test == "sign_flip_exact"
    assert cmp.unit == "scenarios" and cmp.independent_units == 4 and iv.n == 4


def test_failing_every_task_the_reference_solves_is_significant_under_holm() -> None:
    pairs = [(trial(f"s{i}", 0, True, "ref"), trial(f"s{i}", 0, False, "cand")) for i in range(12)]
    cmp = compare_task_success(pairs)
    assert cmp is not None and cmp.p_value is not None
    assert cmp.p_value < 0.01
    # even as the smallest of six headline tests whose others are all null, Holm keeps it below alpha
    assert adjust_pvalues([cmp.p_value] + [1.0] * (HEADLINE_TESTS - 1), "holm")[0] < ALPHA
    assert cmp.difference.value == -1.0 and cmp.difference.high is not None and cmp.difference.high < -0.6


def test_builtin_agent_smoke_can_say_differs() -> None:
    """agent-smoke's size: a candidate failing every task the reference solves clears Holm over six tests,
    even when the reference itself fails two of the tasks (ten discordant scenarios left)."""
    scenarios = builtin_suite("agent-smoke")
    assert len(scenarios) >= 12 and len({s.id for s in scenarios}) == len(scenarios)
    pairs = [(trial(s.id, 0, i >= 2, "ref"), trial(s.id, 0, False, "cand")) for i, s in enumerate(scenarios)]
    cmp = compare_task_success(pairs)
    assert cmp is not None and cmp.p_value is not None and cmp.independent_units == len(scenarios)
    assert adjust_pvalues([cmp.p_value] + [1.0] * (HEADLINE_TESTS - 1), "holm")[0] < ALPHA


def test_several_trials_are_folded_per_scenario() -> None:
    # 3 trials per scenario: the unit is still the scenario (n = 5), and each scenario weighs the same
    rng = random.Random(1)
    pairs = simulate([0.9] * 5, [0.4] * 5, 3, rng)
    cmp = compare_task_success(pairs)
    assert cmp is not None and cmp.independent_units == 5 and cmp.difference.n == 5
    ref_mean = sum(r.success for r, _ in pairs) / 15
    cand_mean = sum(c.success for _, c in pairs) / 15
    assert cmp.difference.value == pytest.approx(cand_mean - ref_mean)
    with pytest.raises(ValueError, match="unpaired"):
        compare_task_success([(trial("a", 0, True, "ref"), trial("b", 0, True, "cand"))])
    assert compare_task_success([]) is None


def reference_levels(rng: random.Random) -> list[float]:
    """Per-scenario solve probabilities of a capable reference: most tasks easy, a few hard."""
    return [rng.choice((0.6, 0.8, 0.95, 1.0)) for _ in range(12)]


@pytest.mark.parametrize("trials", [1, 3])
def test_aa_p_values_are_calibrated(trials: int) -> None:
    """A/A (the same sampling behaviour under two names): P(p <= u) <= u at every level, not only at alpha.

    Checking several levels is what lets this test fail: the exact test is conservative at u = 0.05 (few
    discordant scenarios), so a p-value halved by mistake would still pass there, but not at u = 0.25 or 0.5.
    Limits are u plus 2.6 binomial standard errors over 2,000 runs; a test at 2u exceeds them by far.
    """
    rng = random.Random(20 + trials)
    runs = 2000
    pvalues = []
    for _ in range(runs):
        levels = reference_levels(rng)
        cmp = compare_task_success(simulate(levels, levels, trials, rng))
        assert cmp is not None and cmp.p_value is not None
        pvalues.append(cmp.p_value)
    for u in (0.05, 0.1, 0.25, 0.5):
        rate = sum(p <= u for p in pvalues) / runs
        assert rate <= u + 2.6 * (u * (1 - u) / runs) ** 0.5, (u, rate)
    # and it is a test, not a constant: half the runs with any discordance reach p <= 0.5
    assert sum(p <= 0.5 for p in pvalues) / runs > 0.2


CoverageCase = tuple[str, Callable[[random.Random], tuple[list[float], list[float]]], float]


def _drop_half(rng: random.Random) -> tuple[list[float], list[float]]:
    ref = reference_levels(rng)
    return ref, [p - 0.3 if rng.random() < 0.5 else p for p in ref]


COVERAGE: list[CoverageCase] = [
    # (name, per-run scenario draw, true difference in the scenario population)
    ("aa", lambda rng: (lambda r: (r, r))(reference_levels(rng)), 0.0),
    ("drop 30 pts on half the scenarios", _drop_half, -0.15),
    ("a true 25-point drop from perfect", lambda rng: ([1.0] * 12, [0.75] * 12), -0.25),
    ("a true 10-point drop", lambda rng: ([0.95] * 12, [0.85] * 12), -0.10),
]


@pytest.mark.parametrize("trials", [1, 3])
@pytest.mark.parametrize("case", COVERAGE, ids=[c[0] for c in COVERAGE])
def test_difference_interval_covers(case: CoverageCase, trials: int) -> None:
    """95 % intervals cover the true difference in >= 93 % of 1,500 runs of 12 scenarios (a zero-width interval
    on runs where every scenario agrees, the old cluster-robust one, covered a true 25-point drop far less)."""
    name, draw, truth = case
    rng = random.Random(zlib.crc32(f"{name}:{trials}".encode()))
    runs, covered = 1500, 0
    for _ in range(runs):
        ref, cand = draw(rng)
        iv = compare_task_success(simulate(ref, cand, trials, rng))
        assert iv is not None
        d = iv.difference
        assert d.low is not None and d.high is not None and d.low < d.high
        covered += d.low <= truth <= d.high
    assert covered / runs >= 0.93, (name, trials, covered / runs)


def test_score_records_reports_the_comparison_on_scenarios() -> None:
    """End to end through score_records: 12 scenarios, the candidate fails the 9 the reference solves."""
    recs = []
    for sc in range(12):
        acts = [f"a{sc}()", "b()"]
        recs += trajectory("ref", f"c{sc}", 0, acts, success=sc < 9)
        recs += trajectory("cand", f"c{sc}", 0, acts, success=False)
    ref, cand = score_records(recs, "s", "ref", ["ref", "cand"])
    cmp = cand.comparisons["task_success"]
    assert cmp.test == "sign_flip_exact" and cmp.unit == "scenarios" and cmp.independent_units == 12
    assert cmp.p_value == pytest.approx(2 / 2**9)
    assert cmp.difference.value == pytest.approx(-0.75) and cmp.difference.high < 0
    # pass^1 is task success, interval and all
    assert ref.metrics["pass^1"] == ref.metrics["task_success"]
    assert ref.metrics["task_success"].n == 12 and ref.metrics["task_success"].method == "wilson_units"
