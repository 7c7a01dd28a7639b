"""Anytime-valid bounds for a ratio of means ``E[a] / E[b]`` by betting, at every look at once.

Why: trigger F1 and argument agreement are ratios (F1 = 2 TP / (2 TP + FP + FN); agreement = agreeing calls / calls
compared), not means of one bounded per-case value, and the sequential verdict needs a confidence sequence for each
(Waudby-Smith & Ramdas 2024, JRSS-B). A ratio ``R = E[a] / E[b]`` (per case ``0 <= a <= b <= 1``) is at most ``r``
exactly when ``E[a - r b] <= 0``: a bounded mean again, so the betting test of :mod:`verifier.stats.sequential`
applies to the linearised values ``z = a - r b``. A plain mean is the case ``b = 1``.

The bets are scaled so that every factor stays positive whatever the data: against "R <= r" the factor is
``1 + g (a / r - b)`` (>= 1 - g), against "R >= r" it is ``1 - g (a - r b) / (1 - r)`` (>= 1 - g, since ``a <= b``),
``g`` on the grid :data:`~verifier.stats.sequential.BET_GRID` (below 1), the capitals averaged over the grid. Each
factor is monotone in ``r`` (the first falls, the second rises), so each bound is found by bisection, and a rejected
``r`` rejects every ``r`` beyond it.

Speed: a case's values take few distinct pairs (one trigger decision a side gives four), so a capital after ``t``
cases is ``sum_u count_u(t) log(factor_u)`` over the distinct pairs: every look and every bisection step costs
``looks x grid x distinct`` operations, whatever the number of cases (the savings benchmark runs thousands of paths).
"""

from __future__ import annotations

import numpy as np

from verifier.stats.sequential import BET_GRID

STEPS = 18  # bisection steps: bounds to within 2^-18 (4e-6) of the truth, rounded to the safe side
_EPS = 1e-12


def counts_at(a: np.ndarray, b: np.ndarray, n_at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct ``(a, b)`` pairs and, per look, how many of the first ``n_at[l]`` cases had each: (A, B, C)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n_at = np.asarray(n_at, dtype=int)
    if a.size == 0:
        return np.zeros(1), np.zeros(1), np.zeros((len(n_at), 1))
    pairs, inv = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    inv = np.asarray(inv).reshape(-1)
    cum = np.zeros((len(a) + 1, len(pairs)))
    cum[np.arange(1, len(a) + 1), inv] = 1.0
    cum = np.cumsum(cum, axis=0)
    return pairs[:, 0], pairs[:, 1], cum[n_at]


def log_capital(A: np.ndarray, B: np.ndarray, C: np.ndarray, r: np.ndarray, side: int) -> np.ndarray:
    """Grid-averaged log capital against "R <= r" (``side=+1``) or "R >= r" (``side=-1``), per look.

    ``A``, ``B`` (distinct) and ``C`` (looks x distinct) from :func:`counts_at`, or stacked for ``Q`` quantities
    (``A``, ``B``: Q x distinct, zero-padded; ``C``: Q x looks x distinct); ``r`` has ``C``'s shape without the
    last axis, with any leading axes (several ``r`` per look)."""
    r = np.asarray(r, dtype=float)[..., None, None]  # (..., [Q,] L, 1, 1)
    a, b = A[..., None, None, :], B[..., None, None, :]  # ([Q,] 1, 1, U)
    g = BET_GRID[:, None]  # (G, 1)
    if side > 0:
        logf = np.log1p(g * (a / np.maximum(r, _EPS) - b))  # (..., [Q,] L, G, U)
    else:
        logf = np.log1p(-g * (a - r * b) / np.maximum(1.0 - r, _EPS))
    logs = np.sum(C[..., None, :] * logf, axis=-1)  # (..., [Q,] L, G)
    peak = logs.max(axis=-1, keepdims=True)
    return (peak + np.log(np.mean(np.exp(logs - peak), axis=-1, keepdims=True)))[..., 0]


def ratio_bounds(A: np.ndarray, B: np.ndarray, C: np.ndarray, cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of ``R`` per cut (a log threshold, ``log(1 / level)``) and look: arrays (cuts x looks),
    or (cuts x Q x looks) for stacked quantities (``cuts``: K, or K x Q).

    A bound is the last ``r`` rejected at its cut (0 or 1 when none is), so it errs outwards. Looks without a
    case (no ``b`` at all) give ``[0, 1]``. Not intersected over looks: :func:`running` does that.
    """
    den, num = np.einsum("...lu,...u->...l", C, B), np.einsum("...lu,...u->...l", C, A)  # ([Q,] L)
    cuts = np.asarray(cuts, dtype=float)
    cuts = cuts.reshape(cuts.shape + (1,) * (den.ndim - cuts.ndim + 1))  # (K, [Q,] 1)
    est = np.where(den > 0, num / np.maximum(den, _EPS), 0.5)
    shape = np.broadcast_shapes(cuts.shape, den.shape)
    # lower: r in [0, est], upper: r in [est, 1]; est itself is never rejected (the capital cannot grow there)
    lo_l, hi_l = np.zeros(shape), np.broadcast_to(est, shape).copy()
    lo_u, hi_u = np.broadcast_to(est, shape).copy(), np.ones(shape)
    for _ in range(STEPS):
        mid_l, mid_u = (lo_l + hi_l) / 2, (lo_u + hi_u) / 2
        rej_l = log_capital(A, B, C, mid_l, +1) >= cuts  # falls as r rises
        rej_u = log_capital(A, B, C, mid_u, -1) >= cuts  # rises with r
        lo_l, hi_l = np.where(rej_l, mid_l, lo_l), np.where(rej_l, hi_l, mid_l)
        lo_u, hi_u = np.where(rej_u, lo_u, mid_u), np.where(rej_u, mid_u, hi_u)
    empty = den <= 0
    return np.where(empty, 0.0, lo_l), np.where(empty, 1.0, hi_u)


def stack(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Several :func:`counts_at` results (same looks) as one zero-padded stack, to bound them in one pass."""
    width = max(len(a) for a, _, _ in parts)
    A, B = np.zeros((len(parts), width)), np.zeros((len(parts), width))
    C = np.zeros((len(parts), parts[0][2].shape[0], width))
    for q, (a, b, c) in enumerate(parts):
        A[q, : len(a)], B[q, : len(b)], C[q, :, : c.shape[1]] = a, b, c
    return A, B, C


def running(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The running intersection over looks (last axis): a confidence sequence holds at every look at once, so the
    intersection of its past intervals covers with the same probability and never widens."""
    return np.maximum.accumulate(lower, axis=-1), np.minimum.accumulate(upper, axis=-1)


def ratio_cs(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[float, float]:
    """Two-sided (1 - alpha) confidence sequence for ``E[a] / E[b]`` after all of ``a, b``, each side at alpha/2."""
    A, B, C = counts_at(a, b, np.arange(1, len(np.asarray(a)) + 1))
    low, high = running(*ratio_bounds(A, B, C, np.array([np.log(2.0 / alpha)])))
    return float(low[0, -1]), float(high[0, -1])
