"""Agent scoring on hand-built step records: pass^k, Kaplan-Meier, attempts, divergence, comparisons."""

from __future__ import annotations

import math

import pytest

from verifier.kinds.agent.scoring import (
    collect_trials,
    divergence,
    kaplan_meier,
    km_median,
    pass_hat_k,
    pass_k_intervals,
    score_records,
)
from verifier.records import ExchangeRecord


def step(endpoint: str, case: str, trial: int, idx: int, actions: list[str], invalid: int = 0,
         stop: str | None = None, success: bool = False, attempt: int = 0, horizon: int = 10) -> ExchangeRecord:
    extra = {"attempt": attempt, "horizon": horizon, "n_calls": len(actions), "n_invalid": invalid,
             "actions": actions, "calls": [{"name": "x", "valid": i >= invalid,
                                             "error_kind": "schema_violation" if i < invalid else None}
                                            for i in range(len(actions))]}
    if stop:
        extra.update(stop_reason=stop, success=success)
    return ExchangeRecord(request_hash="h", status=200, kind="agent_step", suite="s", case_id=case, repeat=trial,
                          endpoint=endpoint, step=idx, variant=None if attempt == 0 else f"attempt{attempt}",
                          extra=extra)


def trajectory(endpoint: str, case: str, trial: int, actions: list[str], invalid_at: int | None = None,
               success: bool = True) -> list[ExchangeRecord]:
    recs = [step(endpoint, case, trial, i, [a], invalid=int(i == invalid_at)) for i, a in enumerate(actions)]
    recs.append(step(endpoint, case, trial, len(actions), [], stop="final_answer", success=success))
    return recs


def test_pass_hat_k_matches_tau_bench_formula() -> None:
    assert pass_hat_k(3, 5, 1) == pytest.approx(0.6)
    assert pass_hat_k(3, 5, 2) == pytest.approx(3 / 10)
    assert pass_hat_k(3, 5, 4) == 0.0
    assert pass_hat_k(5, 5, 5) == 1.0
    with pytest.raises(ValueError):
        pass_hat_k(1, 2, 3)
    ivs = pass_k_intervals({"a": [True, True, False], "b": [True, False, False]})
    assert sorted(ivs) == [1, 2, 3]
    assert ivs[1].value == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert ivs[2].value == pytest.approx((1 / 3 + 0) / 2)
    assert ivs[3].value == 0.0 and ivs[1].n == 2
    # the interval never collapses on agreement: two scenarios solved every time rule out little
    assert pass_k_intervals({"a": [True], "b": [True]})[1].low < 0.5


def test_kaplan_meier_textbook_example() -> None:
    # events at 1, 2, 2, 5; censored at 3 and 6 (hand computed: 5/6, 1/2, 1/4)
    curve = kaplan_meier([1, 2, 2, 3, 5, 6], [True, True, True, False, True, False])
    assert curve.at(0) == 1.0
    assert curve.at(1) == pytest.approx(5 / 6)
    assert curve.at(2) == curve.at(4) == pytest.approx(0.5)
    assert curve.at(5) == pytest.approx(0.25)
    lo, hi = curve.band_at(2)
    assert lo < 0.5 < hi
    med = km_median(curve)
    assert med.value == 2 and med.n == 6 and med.method == "kaplan_meier"
    # all censored: the curve stays at 1 and the median is unknown, not zero
    assert km_median(kaplan_meier([3, 4], [False, False])).value is None


def test_restarted_trial_uses_finished_attempt() -> None:
    recs = [step("e", "c", 0, 0, ["a()"]), step("e", "c", 0, 1, ["b()"])]  # attempt 0, interrupted
    recs += [step("e", "c", 0, 0, ["a()"], attempt=1), step("e", "c", 0, 1, [], stop="final_answer",
                                                            success=True, attempt=1)]
    by_ep, interrupted = collect_trials(recs, "s")
    (trial,) = by_ep["e"]
    assert trial.attempt == 1 and trial.success and trial.stop_reason == "final_answer"
    assert interrupted == {"e": 1}


def test_divergence_first_departing_step() -> None:
    ref = collect_trials(trajectory("r", "c", 0, ["a()", "b()", "c()"]), "s")[0]["r"][0]
    same = collect_trials(trajectory("k", "c", 0, ["a()", "b()", "c()"]), "s")[0]["k"][0]
    other = collect_trials(trajectory("k", "c", 0, ["a()", "x()", "c()"]), "s")[0]["k"][0]
    short = collect_trials(trajectory("k", "c", 0, ["a()"]), "s")[0]["k"][0]
    assert divergence(ref, same) == (4, False, None, None)
    assert divergence(ref, other)[:2] == (2, True)
    assert divergence(ref, other)[2:] == ("b()", "x()")
    assert divergence(ref, short)[:3] == (2, True, "b()")


def test_score_records_metrics_series_and_clustered_comparison() -> None:
    recs = []
    for sc in range(6):
        for trial in range(2):
            acts = [f"a{sc}()", "b()", "c()", "d()"]
            recs += trajectory("ref", f"c{sc}", trial, acts, success=True)
            # candidate: breaks at step 2 on half the scenarios and then fails those tasks
            bad = sc % 2 == 0
            cacts = acts if not bad else acts[:2] + ["oops()"] + acts[3:]
            recs += trajectory("cand", f"c{sc}", trial, cacts, invalid_at=2 if bad else None, success=not bad)
    ref, cand = score_records(recs, "s", "ref", ["ref", "cand"])
    assert ref.is_reference and not cand.is_reference
    # task success rests on scenarios (n = 6), not on the 12 trials: trials of one scenario are not independent
    assert ref.metrics["task_success"].value == 1.0 and ref.metrics["task_success"].n == 6
    assert cand.metrics["task_success"].value == 0.5
    assert cand.metrics["pass^1"].value == 0.5 and cand.metrics["pass^2"].value == 0.5
    assert cand.metrics["pass^2"].n == 6
    # 12 trials x 4 tool steps; 6 trials have one invalid step
    assert cand.metrics["step_validity"].value == pytest.approx(1 - 6 / 48)
    assert ref.metrics["step_validity"].value == 1.0
    assert ref.metrics["first_invalid_step_median"].value is None  # never invalid: censored everywhere
    # half the trials depart at step 3, the rest never: S(3) = 0.5, the median by the S <= 0.5 convention
    assert cand.metrics["trajectory_divergence_step_median"].value == 3.0
    diff = cand.comparisons["task_success"].difference
    assert diff.value == pytest.approx(-0.5) and diff.low < -0.5 < diff.high and diff.method == "newcombe_units"
    assert cand.comparisons["task_success"].independent_units == 6
    assert cand.comparisons["step_validity"].difference.value == pytest.approx(-0.125)
    assert {s.name for s in cand.series} >= {"task_success_by_horizon", "step_validity_by_step",
                                             "survival_first_invalid", "survival_same_as_reference"}
    by_step = next(s for s in cand.series if s.name == "step_validity_by_step")
    assert by_step.x == [0.0, 1.0, 2.0, 3.0] and by_step.y[2] == 0.5 and by_step.y[0] == 1.0
    assert all(lo <= y <= hi for y, lo, hi in zip(by_step.y, by_step.low, by_step.high))
    assert cand.disagreements and cand.disagreements[0].kind == "trajectory"
    assert cand.counts["invalid_calls"] == 6 and cand.counts["stop:final_answer"] == 12
    assert cand.counts["error:schema_violation"] == 6
    assert math.isclose(cand.metrics["task_success"].low, 0.1876, abs_tol=1e-3)  # Wilson 3/6: scenarios
    assert cand.metrics["pass^1"] == cand.metrics["task_success"]


def test_cluster_p_value_matches_the_t_test_on_cluster_means() -> None:
    from scipy import stats as sst

    from verifier.kinds.agent.scoring import _cluster_p
    from verifier.stats.intervals import cluster_robust_diff

    # one pair per cluster: CR1 reduces to the paired t test on the differences
    a = [1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    b = [0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    iv = cluster_robust_diff(a, b, list(range(8)))
    expected = sst.ttest_rel(b, a).pvalue
    # CR1 scales the variance by G/(G-1) against the paired t test's n/(n-1) convention: identical here
    assert _cluster_p(iv, 8) == pytest.approx(expected, rel=1e-6)
    assert _cluster_p(cluster_robust_diff([1.0, 1.0], [1.0, 1.0], [0, 1]), 2) == 1.0
