"""Boundary calibration of the verdict: where the true difference equals the margin, ``consistent`` at most alpha.

Every world is simulated through the real scoring and the real rule (``verifier.testing.verdict_sim``). Each test
can fail: narrowing the intervals the rule reads to half their width makes the schema-margin check fail (42 of
250 ``differs`` at the margin, limit 18.75) and the agent-margin check fail (43 of 300 ``consistent``, limit
22.5), and reading a top-k lower bound as an estimate makes the heavy-tail KL candidate ``consistent`` in every run
(checked by hand).
"""

from __future__ import annotations

import numpy as np
import pytest

from verifier.kinds.logprob.cluster_ci import MIN_CLUSTERS
from verifier.kinds.logprob.estimator import exact_kl, topk_from_full, topk_kl
from verifier.kinds.logprob.stats import kl_statistics
from verifier.records import Interval
from verifier.run.summary import EndpointSuiteResult
from verifier.run.verdict import VerdictPolicy, verdict_for
from verifier.testing.verdict_sim import (
    Endpoint,
    judge,
    kl_sequences,
    sampling_behaviour,
    score_agent_pair,
    score_kl_pair,
    score_toolcall_pair,
    shifted,
    toolcall_cases,
)

ALPHA = 0.05


def _limit(runs: int) -> float:
    """1.5 alpha: a rule at alpha passes with high probability, one at 2 alpha fails with high probability."""
    return 1.5 * ALPHA * runs


@pytest.mark.slow
def test_schema_per_call_at_the_margin_is_rarely_consistent() -> None:
    """Every case calls once; the candidate's arguments fail 5 points more often per call (exactly the margin)."""
    runs, n = 250, 120
    rng = np.random.default_rng(38)
    cases = toolcall_cases(n, "s")
    always = np.ones(n)
    consistent = differs = 0
    for _ in range(runs):
        v = judge([score_toolcall_pair("s", cases, Endpoint(always, 0.10), Endpoint(always, 0.15), rng)],
                  VerdictPolicy(alpha=ALPHA))
        schema = next(e for e in v.evidence if e.metric == "schema_accuracy")
        consistent += schema.status == "consistent"
        differs += schema.status == "differs"  # at |d| = margin, "beyond the margin" is a false alarm too
        assert v.status != "differs" or schema.status == "differs"
    assert consistent <= _limit(runs), f"{consistent} of {runs} runs at the margin were shown inside it"
    assert differs <= _limit(runs), f"{differs} of {runs} runs at the margin were shown beyond it"


@pytest.mark.slow
def test_schema_margin_is_per_call_when_triggers_are_ambiguous() -> None:
    """A sampling server (a fifth of the cases a coin flip): the margin is per call on cases both called, so a
    per-exchange figure ("no call" counted valid) must not be what is judged. Skipped, saying why, while the
    tool-call scoring still pairs schema accuracy per exchange (issue 38's scoring half changes it)."""
    runs, n = 250, 160
    rng = np.random.default_rng(39)
    cases = toolcall_cases(n, "s")
    consistent = 0
    for i in range(runs):
        p = sampling_behaviour(n, rng)
        ref, cand = score_toolcall_pair("s", cases, Endpoint(p, 0.10), Endpoint(p, 0.15), rng)
        unit = cand.comparisons["schema_accuracy"].unit or ""
        if i == 0 and "call" not in unit:
            pytest.skip(f"score_toolcall pairs schema accuracy per {unit or 'exchange'}, not per call")
        v = judge([(ref, cand)], VerdictPolicy(alpha=ALPHA))
        consistent += next(e for e in v.evidence if e.metric == "schema_accuracy").status == "consistent"
    assert consistent <= _limit(runs), f"{consistent} of {runs} runs at the per-call margin showed schema inside"


@pytest.mark.slow
def test_two_point_schema_drop_at_large_n_is_not_differs() -> None:
    """A 2-point per-call drop, inside the ±5 margin, on 1,500 calls: the old point-null rule said differs 89 %.

    The inside-the-margin check is on the schema headline itself: the verdict as a whole also waits on argument
    agreement, whose floor comes from the reference's 150 repeated cases (10 %) and is too wide at this n to show
    a 1-2 point agreement drop inside ±5 (interval about [-5.7, +4.6]), so the verdict is ``inconclusive``."""
    rng = np.random.default_rng(7)
    cases = toolcall_cases(1500, "s")
    always = np.ones(1500)
    verdicts = [judge([score_toolcall_pair("s", cases, Endpoint(always, 0.05), Endpoint(always, 0.07), rng)],
                      VerdictPolicy(alpha=ALPHA)) for _ in range(3)]
    assert "differs" not in [v.status for v in verdicts], [v.headline for v in verdicts]
    schema = [next(e for e in v.evidence if e.metric == "schema_accuracy").status for v in verdicts]
    assert schema.count("consistent") >= 2, schema  # and at this n it is shown inside the margin


def test_agent_with_four_scenarios_is_not_testable_and_never_consistent() -> None:
    rng = np.random.default_rng(4)
    ref_p = np.full(4, 0.9)
    statuses = set()
    for _ in range(40):
        v = judge([score_agent_pair(ref_p, ref_p - 0.25, 1, rng)], VerdictPolicy(alpha=ALPHA))
        statuses.add(v.status)
        assert v.not_testable == ["task_success"], v.headline
        assert "agent task success not testable: 4 scenarios, needs at least 10" in v.headline
    assert statuses == {"inconclusive"}
    v = judge([score_agent_pair(np.ones(4), np.zeros(4), 1, rng)], VerdictPolicy(alpha=ALPHA))
    assert v.status == "inconclusive" and "not testable" in v.headline  # failing every task: still too few


def test_agent_failing_every_task_on_enough_scenarios_differs() -> None:
    rng = np.random.default_rng(5)
    v = judge([score_agent_pair(np.ones(12), np.zeros(12), 2, rng)], VerdictPolicy(alpha=ALPHA))
    assert v.status == "differs", v.headline
    assert "agent task success -100.0 pts" in v.headline and "over 12 scenarios" in v.headline


@pytest.mark.slow
def test_agent_aa_and_margin_calibration() -> None:
    """30 scenarios x 3 trials. A/A: differs at most alpha even with task success material (point null).
    Truth exactly 10 points worse (the margin): consistent at most alpha."""
    rng = np.random.default_rng(6)
    runs, scenarios = 300, 30
    material = VerdictPolicy(alpha=ALPHA, material=["task_success"])
    aa_differs = margin_consistent = 0
    for _ in range(runs):
        base = rng.uniform(0.25, 0.95, scenarios)
        aa_differs += judge([score_agent_pair(base, base, 3, rng)], material).status == "differs"
        at_margin = judge([score_agent_pair(base, shifted(base, -0.10), 3, rng)], VerdictPolicy(alpha=ALPHA))
        margin_consistent += at_margin.status == "consistent"
    assert aa_differs <= _limit(runs), f"A/A: {aa_differs} of {runs} said differs"
    assert margin_consistent <= _limit(runs), f"at the margin: {margin_consistent} of {runs} said consistent"


def _heavy_tail_kl(rng: np.random.Generator, sequences: int = 24, positions: int = 30, vocab: int = 400,
                   k: int = 20) -> tuple[Interval, float]:
    """A candidate whose disagreement with the reference sits in the tail beyond the top-20: the top-k figure
    (real estimator, real sequence-bootstrap statistics) is far below the exact KL, which is 3x the margin."""
    logits = rng.standard_normal((sequences * positions, vocab)) * 2.5
    ref = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    noise = rng.standard_normal(logits.shape) * 0.6
    noise[np.arange(len(logits))[:, None], np.argsort(-logits, axis=1)[:, :k]] *= 0.05  # the top-k barely moves
    cand_logits = logits + noise
    cand = cand_logits - np.logaddexp.reduce(cand_logits, axis=1, keepdims=True)
    exact = float(exact_kl(ref, cand).mean())
    est = topk_kl(topk_from_full(ref, k), topk_from_full(cand, k), threads=1)
    seq = np.repeat(np.arange(sequences), positions)
    st = kl_statistics(est.kl, seq, n_boot=400)
    return st.kl_mean, exact


def test_topk_kl_with_a_heavy_tail_is_never_consistent() -> None:
    rng = np.random.default_rng(9)
    policy = VerdictPolicy(alpha=ALPHA)
    margin = policy.margins["kl_mean"]
    would_pass = 0
    for _ in range(5):
        topk, exact = _heavy_tail_kl(rng)
        assert exact >= margin and topk.high is not None and topk.high < margin, (exact, topk)
        for name in ("kl_topk_lower", "kl_mean"):  # the new metric name, and a legacy top-k "kl_mean"
            r = EndpointSuiteResult(endpoint="cand", suite="lp", kind="logprob", metrics={name: topk},
                                    counts={"forced_sequences": 24}, extra={"headline_path": "forced"})
            v = verdict_for("cand", [r], [], "ref", policy)
            assert v.status != "consistent", v.headline
            assert v.evidence[0].bound == "lower" and v.evidence[0].independent_units == 24
        as_estimate = topk.model_copy(update={"method": "sampled_k3"})  # the mistake the rule must not make
        r = EndpointSuiteResult(endpoint="cand", suite="lp", kind="logprob", metrics={"kl_mean": as_estimate})
        would_pass += verdict_for("cand", [r], [], "ref", policy).status == "consistent"
    assert would_pass == 5  # so the check above could fail: read as an estimate, this tail passes


@pytest.mark.slow
def test_kl_at_the_margin_in_a_heavy_world_is_rarely_consistent() -> None:
    """10 prompts (the minimum), one 64-token sequence each, a prompt's KL level log-sd 0.83 (the harsh world of
    benchmarks/kl_coverage.py, as the ``kl_mean_heavy`` calibration row), true mean KL exactly the margin: exact KL
    records through the real ``score_logprob`` and ``verdict_for`` show ``consistent`` at most alpha.

    2,000 runs, limit alpha (100): a rule at the nominal 2.5 % passes with near certainty (expected 50, sd 7), one
    at 2 alpha fails with near certainty (expected 200, sd 13). With the interval's upper end at the equal-tailed
    97.5 % (``cluster_ci.UPPER_TAIL = None``, the method before) this test fails: 124 of 2,000 (6.2 %); with it,
    33 (1.65 %)."""
    runs = 2000
    rng = np.random.default_rng(2026)
    policy = VerdictPolicy(alpha=ALPHA)
    margin = policy.margins["kl_mean"]
    consistent = 0
    for _ in range(runs):
        v = judge([score_kl_pair(kl_sequences(MIN_CLUSTERS, 64, margin, rng, seq_sd=0.83))], policy)
        consistent += next(e for e in v.evidence if e.metric == "kl_mean").status == "consistent"
    assert consistent <= ALPHA * runs, f"{consistent} of {runs} runs at the KL margin were shown inside it"
