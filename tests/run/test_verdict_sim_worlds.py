"""The simulated worlds of the verdict calibration (``verifier.testing.verdict_sim``) have the truth they state.

Why: the calibration table (benchmarks/verdict_calibration.py) reads "false consistent at the margin" as an error
only if the world's true difference *is* the margin; these checks compute it analytically (or, for the KL sequences,
by a large sample) instead of trusting the docstrings.
"""

from __future__ import annotations

import numpy as np

from verifier.testing.verdict_sim import (
    Endpoint,
    f1_lowered,
    kl_sequences,
    sampling_behaviour,
    score_kl_pair,
    score_toolcall_pair,
    toolcall_cases,
    twin_agreement,
)


def _expected_f1(p: np.ndarray, q: np.ndarray) -> float:
    return float(2 * (p * q).sum() / (p.sum() + q.sum()))


def test_f1_lowered_moves_expected_f1_by_delta_and_keeps_the_trigger_rate() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = sampling_behaviour(500, rng)
        for delta in (0.0, 0.05, 0.10):
            q = f1_lowered(p, delta)
            assert abs(q.sum() - p.sum()) < 1e-9
            assert abs(_expected_f1(p, p) - _expected_f1(p, q) - delta) < 1e-9


def test_argument_world_agreement_is_delta_below_a_twin() -> None:
    """One call per case; a twin agrees with probability a^2 + (1-a)^2; a third city on a share e of the
    candidate's calls leaves (1 - e) of that. Checked by simulation on 2,500 cases, through the real scoring."""
    rng = np.random.default_rng(1)
    n = 2500
    alt = np.where(rng.random(n) < 0.2, 0.5, 0.0)
    twin = twin_agreement(alt)
    assert abs(twin - 0.9) < 0.01
    e = 0.10 / twin
    ref, cand = score_toolcall_pair("s", toolcall_cases(n, "s"), Endpoint(np.ones(n), 0.0, alt),
                                    Endpoint(np.ones(n), 0.0, alt, e), rng)
    got = cand.metrics["argument_agreement"].value
    assert got is not None and abs(got - (twin - 0.10)) < 0.025, (got, twin)


def test_kl_sequences_have_the_stated_mean_and_score_as_exact_kl() -> None:
    rng = np.random.default_rng(2)
    seqs = kl_sequences(4000, 64, 0.01, rng)
    assert abs(float(np.mean(seqs)) / 0.01 - 1) < 0.03
    _, cand = score_kl_pair(kl_sequences(30, 64, 0.01, rng))
    kl = cand.metrics["kl_mean"]
    assert kl.method == "exact_cluster_bootstrap_t" and kl.low is not None and kl.high is not None
    assert cand.extra["kl_method"] == "exact" and cand.counts["sampled_exact_sequences"] == 30
