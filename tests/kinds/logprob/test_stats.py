"""llama.cpp-style statistics: definitions checked by hand, intervals resample sequences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verifier.kinds.logprob.stats import kl_cdf_series, kl_statistics


def test_definitions_by_hand() -> None:
    kl = np.array([0.0, 0.1, 0.2, 0.3])
    seq = np.array([0, 0, 1, 1])
    lr = np.log([0.5, 0.5, 0.8, 0.2])
    lc = np.log([0.4, 0.6, 0.8, 0.1])
    st = kl_statistics(kl, seq, ref_token_logprob=lr, cand_token_logprob=lc, same_top=np.array([1, 1, 0, 1]))
    assert st.n_positions == 4 and st.n_sequences == 2
    assert st.kl_mean.value == pytest.approx(0.15) and st.kl_mean.n == 4
    assert st.kl_max == pytest.approx(0.3)
    assert st.kl_percentiles["p50"] == pytest.approx(0.15)
    dp = np.array([-0.1, 0.1, 0.0, -0.1])
    assert st.delta_p_mean.value == pytest.approx(dp.mean())
    assert st.delta_p_rms.value == pytest.approx(math.sqrt((dp**2).mean()))
    assert st.same_top.value == pytest.approx(0.75)
    assert st.ln_ppl_ratio.value == pytest.approx(float((lr - lc).mean()))
    m = st.metrics()
    for name in ("kl_mean", "kl_median", "kl_p99", "same_top", "delta_p_rms", "ln_ppl_ratio"):
        assert name in m


def test_interval_resamples_sequences_not_tokens() -> None:
    """Many tokens from few sequences with per-sequence offsets: a token bootstrap would be far too narrow."""
    rng = np.random.default_rng(1)
    seq = np.repeat(np.arange(24), 200)
    kl = rng.exponential(0.01, size=seq.size) + np.repeat(rng.exponential(0.05, 24), 200)
    st = kl_statistics(kl, seq)
    width = st.kl_mean.high - st.kl_mean.low
    token_se = kl.std() / math.sqrt(kl.size)
    assert width > 6 * token_se
    assert st.kl_mean.low <= kl.mean() <= st.kl_mean.high


def test_few_sequences_get_no_interval() -> None:
    """Below the minimum number of sequences the estimate stands alone: never a zero-width or too-narrow interval."""
    seq = np.repeat(np.arange(5), 50)
    st = kl_statistics(np.full(seq.size, 0.02), seq)
    assert st.kl_mean.value == pytest.approx(0.02) and st.kl_mean.low is None and st.kl_mean.high is None


def test_empty_and_nonfinite() -> None:
    st = kl_statistics(np.array([]), np.array([]))
    assert st.kl_mean.value is None and st.kl_mean.n == 0
    with pytest.raises(ValueError, match="non-finite"):
        kl_statistics(np.array([np.inf]), np.array([0]))


def test_cdf_series_monotone() -> None:
    s = kl_cdf_series(np.random.default_rng(0).exponential(size=1000), "cand")
    assert s.y[0] == 0.0 and s.y[-1] == 1.0
    assert all(a <= b for a, b in zip(s.x, s.x[1:]))
