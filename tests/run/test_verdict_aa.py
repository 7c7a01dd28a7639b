"""A/A calibration of the verdict: the reference under another name must come out ``differs`` at most alpha of runs.

Each simulated run draws tool-call replies for a reference and a candidate from the *same* per-case behaviour (a
sampling server: a fifth of the cases a coin flip, a fifth of the arguments malformed) on four suites, writes them
as ExchangeRecords, scores them with the real ``score_toolcall`` and judges them with the real ``verdict_for``
(``verifier.testing.verdict_sim``).

Why four suites and every metric marked material: under the default policy an A/A almost never shows a difference
*beyond a margin*, so that check alone could not see a broken multiplicity correction. With every headline tested
against the point null, each run has a family of eight tests (schema accuracy and forced-call success per suite;
more once scoring adds trigger F1 and argument agreement), and only Holm keeps the family-wise error at alpha:
without Holm this world says ``differs`` in 10-13 % of runs (measured: 41 of 400 on seed 1, 51 of 400 on this test's
seed, where the test then fails), with Holm under 1 % (3 of 400 on seed 1).
400 runs put the line at 1.5 alpha (30 runs): a rule at alpha passes with probability ~0.99, one at 2 alpha fails
with probability ~0.96.
"""

from __future__ import annotations

import numpy as np
import pytest

from verifier.kinds.toolcall.scoring import score_toolcall
from verifier.run.verdict import VerdictPolicy
from verifier.testing.verdict_sim import (
    Endpoint,
    judge,
    sampling_behaviour,
    score_toolcall_pair,
    toolcall_cases,
    toolcall_records,
)

ALPHA = 0.05
RUNS = 400
CASES = 40
ALL_MATERIAL = VerdictPolicy(alpha=ALPHA, material=["trigger_f1", "argument_agreement", "schema_accuracy",
                                                    "forced_call_success", "task_success"], min_units={})


@pytest.mark.slow
def test_aa_family_of_point_nulls_says_differs_at_most_alpha() -> None:
    rng = np.random.default_rng(20260105)
    suites = [(name, toolcall_cases(CASES, name, forced_every=2)) for name in "abcd"]
    holm_differs = default_differs = 0
    family_sizes = set()
    for _ in range(RUNS):
        pairs = []
        for name, cases in suites:
            p = sampling_behaviour(CASES, rng)
            pairs.append(score_toolcall_pair(name, cases, Endpoint(p, 0.2), Endpoint(p, 0.2), rng))
        v = judge(pairs, ALL_MATERIAL)
        family_sizes.add(sum(1 for e in v.evidence if e.p_outside is not None))
        holm_differs += v.status == "differs"
        default_differs += judge(pairs, VerdictPolicy(alpha=ALPHA)).status == "differs"
    assert min(family_sizes) >= 8, family_sizes  # the family Holm has to correct for
    limit = 1.5 * ALPHA * RUNS
    assert holm_differs <= limit, f"{holm_differs} of {RUNS} A/A runs said differs (limit {limit:g})"
    assert default_differs <= limit, f"default policy: {default_differs} of {RUNS} A/A runs said differs"


def test_deterministic_aa_is_consistent() -> None:
    """The same replies under another name (a deterministic server): every difference is shown inside its margin."""
    # 200 cases: schema accuracy is judged per call on the cases where both called a tool (about 60 % of them), and
    # with no discordant pair the exact paired bound is inside +-5 points only from about 90 such cases (75 were not)
    rng = np.random.default_rng(1)
    cases = toolcall_cases(200, "s")
    ref = toolcall_records("ref", "s", cases, Endpoint(sampling_behaviour(200, rng), 0.05), rng)
    cand = [r.model_copy(update={"endpoint": "cand"}) for r in ref]
    by = {r.endpoint: r for r in score_toolcall("s", cases, ref + cand, "ref", ["ref", "cand"])}
    v = judge([(by["ref"], by["cand"])], VerdictPolicy(alpha=ALPHA))
    assert v.status == "consistent", v.headline
    assert v.headline.startswith("cand is consistent with ref: trigger F1")
    assert {"trigger_f1", "schema_accuracy"} <= {e.metric for e in v.evidence}


def test_broken_schemas_are_found() -> None:
    """Power control: a candidate whose arguments are malformed 35% of the time (reference: 5%) differs."""
    rng = np.random.default_rng(2)
    cases = toolcall_cases(200, "s")
    p = np.full(200, 0.97)
    v = judge([score_toolcall_pair("s", cases, Endpoint(p, 0.05), Endpoint(p, 0.35), rng)], VerdictPolicy())
    assert v.status == "differs", v.headline
    schema = next(e for e in v.evidence if e.metric == "schema_accuracy")
    assert "schema accuracy" in v.headline and schema.status == "differs"
    assert schema.difference.low <= -0.30 <= schema.difference.high  # the true drop, 30 points, inside its interval
    assert schema.significant and schema.p_holm is not None and schema.p_holm <= ALPHA
