"""The top-k KL estimator against exact KL (scipy) on known distributions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax, rel_entr

from verifier.kinds.logprob.estimator import TopK, exact_kl, topk_from_full, topk_kl


def _pair(n: int, v: int, noise: float, temp: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, v)) * temp
    return log_softmax(logits, axis=1), log_softmax(logits + rng.standard_normal((n, v)) * noise, axis=1)


def test_exact_kl_matches_scipy() -> None:
    ref, cand = _pair(50, 300, 0.5, 2.0)
    want = rel_entr(np.exp(ref), np.exp(cand)).sum(axis=1)
    np.testing.assert_allclose(exact_kl(ref, cand), want, rtol=1e-10, atol=1e-13)


def test_identical_distributions_give_zero() -> None:
    ref, _ = _pair(20, 100, 0.0, 3.0)
    top = topk_from_full(ref, 10)
    res = topk_kl(top, top)
    np.testing.assert_allclose(res.kl, 0.0, atol=1e-12)
    assert (res.overlap == 10).all()


def test_full_support_topk_is_exact() -> None:
    """When k covers the whole vocabulary the union has no unknowns: the estimate must equal exact KL."""
    ref, cand = _pair(40, 16, 0.7, 2.0)
    res = topk_kl(topk_from_full(ref, 16), topk_from_full(cand, 16))
    np.testing.assert_allclose(res.kl, exact_kl(ref, cand), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.lower, exact_kl(ref, cand), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("k", [5, 10, 20])
def test_lower_bound_holds_and_error_shrinks_with_k(k: int) -> None:
    ref, cand = _pair(400, 500, 0.4, 4.0, seed=k)
    exact = exact_kl(ref, cand)
    res = topk_kl(topk_from_full(ref, k), topk_from_full(cand, k))
    assert (res.lower <= exact + 1e-9).all(), "coarsening bound must never exceed the exact KL"
    assert (res.lower <= res.kl + 1e-12).all()
    assert (res.kl >= 0).all()
    # peaked distributions (temp 4): tails are small, so the estimate is close in aggregate
    rel = abs(res.kl.mean() - exact.mean()) / exact.mean()
    assert rel < {5: 0.5, 10: 0.3, 20: 0.2}[k], rel


def test_error_decreases_from_k5_to_k20() -> None:
    ref, cand = _pair(400, 500, 0.4, 4.0, seed=3)
    exact = exact_kl(ref, cand)
    errs = [np.abs(topk_kl(topk_from_full(ref, k), topk_from_full(cand, k)).kl - exact).mean() for k in (5, 10, 20)]
    assert errs[0] > errs[1] > errs[2]


def test_disjoint_lists_and_padding() -> None:
    """Different ids on each side and -1 padding: finite, positive, and the tail masses are reported."""
    r = TopK(np.array([[1, 2, -1]]), np.log(np.array([[0.6, 0.3, 1.0]])))
    c = TopK(np.array([[3, 4, 5]]), np.log(np.array([[0.5, 0.2, 0.1]])))
    res = topk_kl(r, c)
    assert np.isfinite(res.kl).all() and res.kl[0] > 0.5
    assert res.overlap[0] == 0
    np.testing.assert_allclose(res.ref_tail, [0.1])
    np.testing.assert_allclose(res.cand_tail, [0.2])
    assert 0 <= res.lower[0] <= res.kl[0]


def test_different_k_per_side_and_float32() -> None:
    ref, cand = _pair(300, 200, 0.3, 3.0, seed=9)
    exact = exact_kl(ref, cand)
    r, c = topk_from_full(ref, 20), topk_from_full(cand, 8)
    res64 = topk_kl(r, c)
    res32 = topk_kl(r, c, dtype=np.float32, chunk_rows=64, threads=2)
    np.testing.assert_allclose(res32.kl, res64.kl, atol=1e-5)
    assert (res64.lower <= exact + 1e-9).all()


def test_mismatched_lengths_rejected() -> None:
    a = TopK(np.zeros((3, 2), dtype=np.int64), np.zeros((3, 2)))
    b = TopK(np.zeros((2, 2), dtype=np.int64), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="different numbers of positions"):
        topk_kl(a, b)
