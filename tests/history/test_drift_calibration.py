"""A/A calibration of drift detection on simulated histories.

If nothing changes (tonight is drawn from the same distribution as the history), the share of runs that flag
*any* drift must not exceed the stated alpha; and a real change of a size users care about must be caught, so
the test cannot pass by never flagging anything.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from verifier.history import MetricPoint
from verifier.history.drift import DriftSettings, detect_drift_points, series_test
from verifier.stats.intervals import wilson
from verifier.stats.multiple import adjust_pvalues

ALPHA = 0.05
N_CASES = 200
WINDOW = 10
_WILSON = [wilson(k, N_CASES) for k in range(N_CASES + 1)]  # the shared Wilson implementation, computed once
METRICS = {"trigger_f1": 0.80, "schema_accuracy": 0.95, "task_success": 0.55, "same_top": 0.99, "step_validity": 0.9}


def _points(run: int, probs: dict[str, float], rng: np.random.Generator, tau: float = 0.0) -> list[MetricPoint]:
    """One simulated run: each metric is k/n of n Bernoulli cases, optionally with night-to-night jitter tau."""
    out = []
    for name, p in probs.items():
        p_night = float(np.clip(p + rng.normal(0, tau), 0.001, 0.999)) if tau else p
        k = int(rng.binomial(N_CASES, p_night))
        iv = _WILSON[k]
        out.append(
            MetricPoint.model_construct(  # validated fields, built in a hot loop: skip re-validation
                run_id=f"r{run:03d}", started_at=f"2026-01-01T00:{run:02d}:00Z", endpoint="prov", is_reference=False,
                suite="tc", suite_hash="h1", kind="toolcall", basis="value", metric=name, value=k / N_CASES,
                ci_low=iv.low, ci_high=iv.high, n=N_CASES,
            )
        )
    return out


def _flag_rate(replicates: int, seed: int, tau: float = 0.0, shift: dict[str, float] | None = None) -> float:
    rng = np.random.default_rng(seed)
    settings = DriftSettings(alpha=ALPHA, window=WINDOW, min_history=5)
    flagged = 0
    for _ in range(replicates):
        history = [p for r in range(WINDOW) for p in _points(r, METRICS, rng, tau)]
        tonight_probs = {k: v + (shift or {}).get(k, 0.0) for k, v in METRICS.items()}
        current = _points(WINDOW, tonight_probs, rng, tau)
        report = detect_drift_points(f"r{WINDOW:03d}", current, history, settings)
        assert len(report.tests) == len(METRICS)
        flagged += bool(report.drifted)
    return flagged / replicates


@pytest.mark.parametrize("tau", [0.0, 0.03])
def test_aa_false_alarm_rate_within_alpha(tau: float) -> None:
    replicates = 300
    rate = _flag_rate(replicates, seed=7 + int(tau * 100), tau=tau)
    # One-sided binomial bound: if the true family-wise rate were alpha, seeing more than this happens < 0.1%.
    bound = sps.binom.ppf(0.999, replicates, ALPHA) / replicates
    assert rate <= bound, f"A/A flagged drift in {rate:.3f} of runs; stated rate {ALPHA}, bound {bound:.3f}"
    if tau == 0.0:
        # pure sampling noise is where the CI floor makes the test conservative: the estimate itself must be <= alpha
        assert rate <= ALPHA


def test_real_change_is_detected() -> None:
    rate = _flag_rate(100, seed=11, shift={"schema_accuracy": -0.10})
    assert rate >= 0.9, f"a 10-point drop in schema accuracy was caught in only {rate:.2f} of runs"


def test_holm_and_bh_adjustment_match_known_values() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005*4, 0.01*3, 0.03*2, 0.04*1 -> monotone 0.02, 0.03, 0.06, 0.06
    assert adjust_pvalues(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: 0.005*4/1=0.02, 0.01*4/2=0.02, 0.03*4/3=0.04, 0.04*4/4=0.04
    assert adjust_pvalues(p, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_series_test_refuses_without_variance_information() -> None:
    assert series_test(0.9, None, [1.0] * 6, [None] * 6) is None
    t, p, _, _ = series_test(0.5, 0.01, [0.9] * 6, [0.01] * 6)  # type: ignore[misc]
    assert t < 0 and p < 1e-6
