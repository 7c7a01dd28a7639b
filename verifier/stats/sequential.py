"""Anytime-valid tests for paired outcomes: results that stay valid however often one looks at them.

Why its own module: a fixed-n test judged after every batch of cases is wrong (peeking every 50 cases up to 2,000
raises A/A false ``differs`` from ~3 % to ~20 %, issue 38). These statistics are nonnegative (super)martingales under
their null, so Ville's inequality bounds the chance that they *ever* reach ``1/alpha``, at any look:

* :func:`mcnemar_mixture_e`: McNemar's discordant pairs. Under "no difference" each discordant pair is a fair coin
  flip; the Beta(a, a)-mixture likelihood ratio against p = 1/2 (Robbins' method of mixtures; the 2x2 e-values of
  Turner, Ly & Grunwald 2024 are of this family) is a martingale, so ``1 / running max`` is an anytime p-value.
* :func:`betting_log_capital`: a bounded mean by betting (Waudby-Smith & Ramdas 2024, JRSS-B): the capital
  ``prod(1 + lam * (x_i - m))`` of a gambler betting against "mean <= m" (``side=+1``) or "mean >= m" (``side=-1``),
  averaged over a fixed grid of bets so that no sample size has to be targeted. Inverting it over ``m`` is a
  confidence sequence (:func:`betting_cs`); a verdict only needs it at the margins, i.e. four one-sided tests.

Hand-written (about 60 lines of statistics) rather than a package that needs a C++ toolchain (issue 40).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betaln

#: Bets as a share of the largest safe bet 1 / (1 + |m|): small ones win when the mean is near m, large ones early.
BET_GRID: np.ndarray = np.geomspace(0.005, 0.9, 24)


def mcnemar_mixture_e(k: np.ndarray | int, n: np.ndarray | int, a: float = 1.0) -> np.ndarray:
    """e-value of ``k`` candidate-only successes among ``n`` discordant pairs: Beta(a, a)-mixture vs a fair coin.

    ``B(a + k, a + n - k) / B(a, a) / 2^-n``; with ``a = 1`` this is the Bayes factor of Lindley's (1957) paradox
    (uniform prior on the coin's bias). Vectorised over ``k`` and ``n``.
    """
    k_, n_ = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    return np.exp(betaln(a + k_, a + n_ - k_) - betaln(a, a) + n_ * math.log(2.0))


def anytime_p(e_path: np.ndarray) -> float:
    """``min(1, 1 / max e)`` over the looks so far: valid whenever one stops (Ville's inequality)."""
    return float(min(1.0, 1.0 / max(1.0, float(np.max(e_path, initial=1.0)))))


def betting_log_capital(x: np.ndarray, m: float, side: int, looks: np.ndarray | None = None) -> np.ndarray:
    """log of the grid-averaged betting capital against the one-sided null, after each observation (or each look).

    ``x`` in [-1, 1]. ``side=+1`` tests H0 "mean <= m" (capital grows when values sit above ``m``); ``side=-1``
    tests "mean >= m". Each bet ``lam`` keeps ``1 + lam * side * (x - m) > 0`` for every x in [-1, 1], so each
    capital is a nonnegative supermartingale under H0, and so is their average.
    """
    x = np.asarray(x, dtype=float)
    lam = BET_GRID / max(1e-9, 1.0 + side * m)  # 1 / (1 + side * m): the largest bet whose worst case is >= 0
    logs = np.cumsum(np.log1p(np.outer(side * (x - m), lam)), axis=0)  # (n, grid)
    if looks is not None:
        logs = logs[np.asarray(looks, dtype=int) - 1]
    peak = logs.max(axis=1, keepdims=True)
    return (peak + np.log(np.mean(np.exp(logs - peak), axis=1, keepdims=True)))[:, 0]


def rejects(x: np.ndarray, m: float, side: int, alpha: float) -> bool:
    """Whether the one-sided null (``side=+1``: mean <= m; ``-1``: mean >= m) is rejected at level ``alpha`` now.

    Only the current capital is compared: a decision taken the first time it crosses is what Ville's inequality
    covers, and the runner acts (stops) at that first crossing.
    """
    if len(x) == 0:
        return False
    return bool(betting_log_capital(x, m, side)[-1] >= math.log(1.0 / alpha))


def betting_cs(x: np.ndarray, alpha: float, tol: float = 1e-4) -> tuple[float, float]:
    """Two-sided confidence sequence for the mean of ``x`` in [-1, 1] at the last observation (level 1 - alpha).

    The values ``m`` not rejected by either one-sided test at ``alpha / 2``. Each capital is monotone in ``m``
    (the lower one falls as ``m`` rises), so each bound is found by bisection, rounded outwards by ``tol``.
    """
    if len(x) == 0:
        return -1.0, 1.0
    cut = math.log(2.0 / alpha)

    def bound(side: int) -> float:
        inside, outside = float(np.mean(x)), -float(side)  # the mean is never rejected; -side*1 always (or edge)
        if betting_log_capital(x, outside, side)[-1] < cut:
            return outside
        while abs(inside - outside) > tol:
            mid = (inside + outside) / 2
            if betting_log_capital(x, mid, side)[-1] >= cut:
                outside = mid
            else:
                inside = mid
        return outside

    return bound(+1), bound(-1)
