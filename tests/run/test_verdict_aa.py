"""A/A calibration of the verdict: the reference under another name must come out ``differs`` at most alpha of runs.

Each simulated run draws tool-call replies for a reference and a candidate from the *same* per-case behaviour (a
sampling server: a fifth of the cases a coin flip, a fifth of the arguments malformed) on four suites, writes them
as ExchangeRecords, scores them with the real ``score_toolcall`` and judges them with the real ``verdict_for``
(``verifier.testing.verdict_sim``).

Why four suites and every metric marked material: under the default policy an A/A almost never shows a difference
*beyond a margin*, so that check alone could not see a broken multiplicity correction. With every headline tested
against the point null, each run has a family of sixteen tests (schema accuracy, forced-call success, and trigger F1
and argument agreement against the floor from the reference's repeated cases, per suite: the simulated reference
answers cases twice as a real run does), and only Holm keeps the family-wise error at alpha: on this test's seed
Holm gives 3 of 400 runs ``differs`` (default policy: 1 of 400); without Holm 86 of 400, and the test fails.
400 runs put the line at 1.5 alpha (30 runs): a rule at alpha passes with probability ~0.99, one at 2 alpha fails
with probability ~0.96.
"""

from __future__ import annotations

import numpy as np
import pytest

from verifier.kinds.toolcall import reference_repeats
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
    assert min(family_sizes) >= 16, family_sizes  # the family Holm has to correct for (floor-based ones included)
    limit = 1.5 * ALPHA * RUNS
    assert holm_differs <= limit, f"{holm_differs} of {RUNS} A/A runs said differs (limit {limit:g})"
    assert default_differs <= limit, f"default policy: {default_differs} of {RUNS} A/A runs said differs"


@pytest.mark.slow
def test_aa_without_reference_repeats_never_says_differs_from_agreement() -> None:
    """No reference repeats (``--reference-repeat-share 0``): trigger F1 and argument agreement are measured against
    a perfect 1, which a sampling reference's own twin misses by ~20 points here. Such a figure can show the
    candidate close, never different: letting it say ``differs`` made 167 of these 200 runs ``differs``."""
    rng = np.random.default_rng(20260106)
    runs = 200
    suites = [(name, toolcall_cases(CASES, name, forced_every=2)) for name in "ab"]
    differs = 0
    for _ in range(runs):
        pairs = []
        for name, cases in suites:
            p = sampling_behaviour(CASES, rng)
            pairs.append(score_toolcall_pair(name, cases, Endpoint(p, 0.2), Endpoint(p, 0.2), rng, repeat_share=0))
        v = judge(pairs, VerdictPolicy(alpha=ALPHA))
        no_floor = [e for e in v.evidence if e.metric in ("trigger_f1", "argument_agreement")]
        assert no_floor and all(e.p_outside is None and "floor was not measured" in (e.reason or "")
                                for e in no_floor), v.evidence
        differs += v.status == "differs"
    assert differs <= 1.5 * ALPHA * runs, f"{differs} of {runs} A/A runs without reference repeats said differs"


def test_no_floor_agreement_reads_below_perfect_and_promises_no_settling() -> None:
    """Without reference repeats, a sampling twin's argument agreement ~20 points below 1 is named as a shortfall
    from perfect agreement (not "against a twin"), and no number of more cases is promised to settle it: such a
    figure can only ever be shown close."""
    rng = np.random.default_rng(3)
    cases = toolcall_cases(200, "s")
    p = sampling_behaviour(200, rng)
    v = judge([score_toolcall_pair("s", cases, Endpoint(p, 0.1), Endpoint(p, 0.1), rng, repeat_share=0)],
              VerdictPolicy(alpha=ALPHA))
    args = next(e for e in v.evidence if e.metric == "argument_agreement")
    assert args.difference.high is not None and args.difference.high < -args.margin  # far below 1...
    assert args.status == "inconclusive" and args.p_outside is None and args.cases_to_settle is None  # ...not differs
    assert "below perfect agreement)" in v.headline and "against a twin" not in v.headline, v.headline
    assert v.cases_to_settle is None and "more cases alone may not settle it" in v.headline


def test_deterministic_aa_is_consistent() -> None:
    """The same replies under another name (a deterministic server, whose repeated answers are its first ones):
    with enough units every difference is shown inside its margin. Enough: schema accuracy is per call on cases
    where both called (~60 % of cases), and trigger F1 and argument agreement are judged against the floor measured
    on the reference's repeated cases (10 %, the default), whose interval is the wider one: 120 cases (75 calls) or
    1,250 cases (~75 repeated calls, floor bound +5.3 points) cannot show a zero difference inside ±5 points;
    2,000 cases (200 repeated) can."""
    rng = np.random.default_rng(1)
    n = 2000
    cases = toolcall_cases(n, "s")
    ref = toolcall_records("ref", "s", cases, Endpoint(sampling_behaviour(n, rng), 0.05), rng)
    repeat_ids = reference_repeats.choose([c.id for c in cases], reference_repeats.DEFAULT_SHARE, 0)
    again = [r.model_copy(update={"repeat": 1, "extra": {reference_repeats.MARKER: 0}}) for r in ref
             if r.case_id in repeat_ids]
    cand = [r.model_copy(update={"endpoint": "cand"}) for r in ref]
    by = {r.endpoint: r for r in score_toolcall("s", cases, ref + again + cand, "ref", ["ref", "cand"])}
    assert by["cand"].comparisons["argument_agreement"].test == "agreement_minus_reference_floor"  # floor-based
    v = judge([(by["ref"], by["cand"])], VerdictPolicy(alpha=ALPHA))
    assert v.status == "consistent", v.headline
    assert v.headline.startswith("cand is consistent with ref: trigger F1")
    assert {"trigger_f1", "argument_agreement", "schema_accuracy"} <= {e.metric for e in v.evidence}


def test_broken_schemas_are_found() -> None:
    """Power control: a candidate whose arguments are malformed 35% of the time (reference: 5%) differs."""
    rng = np.random.default_rng(2)
    cases = toolcall_cases(200, "s")
    p = np.full(200, 0.97)
    v = judge([score_toolcall_pair("s", cases, Endpoint(p, 0.05), Endpoint(p, 0.35), rng)], VerdictPolicy())
    assert v.status == "differs", v.headline
    assert "schema accuracy -" in v.headline
    schema = next(e for e in v.evidence if e.metric == "schema_accuracy")
    assert schema.difference.value is not None and -0.36 < schema.difference.value < -0.2  # ~30 points lower
    assert schema.significant and schema.p_holm is not None and schema.p_holm <= ALPHA
