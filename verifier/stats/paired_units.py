"""Paired comparisons on a few independent units (agent scenarios): exact tests and score intervals.

Why a module of its own: agent suites have few independent units (a dozen scenarios), each with one or a few
trials per endpoint, and outcomes that are often all 0 or all 1. Normal-theory methods (a cluster-robust t
interval) collapse there: when every scenario agrees, the spread is zero and the interval is ``[0, 0]``, which a
verdict reads as proof of equality; when a candidate fails every task the reference solves the spread is zero again
and no p-value can be formed. The methods here stay honest at any n:

* :func:`sign_flip_p`: the exact paired permutation (sign-flip) test of the per-unit differences. Under "no
  difference" the two endpoints are exchangeable within a unit, so each difference is as likely with either sign;
  the p-value enumerates all ``2^m`` sign patterns exactly (by convolution on a common denominator, so it is exact
  for any number of units). With one trial per unit the differences are -1, 0 or +1 and the test *is* the exact
  two-sided sign test on discordant units (exact McNemar at unit level).
* :func:`paired_score_diff`: Newcombe's (1998) method 10 hybrid score interval for a difference of paired
  proportions, with each unit's outcome its mean over trials (in [0, 1]). On 0/1 outcomes it is exactly
  :func:`verifier.stats.intervals.newcombe_paired_diff`. For fractional outcomes the marginal Wilson intervals use the
  Bernoulli variance ``p(1 - p)``, the largest any [0, 1] variable with mean ``p`` can have, so they are at least as
  wide as the data need.
* :func:`unit_mean_rate`: the Wilson interval of a mean of per-unit shares, with n = units (the same convention, so a
  rate and a difference of rates rest on the same denominator).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from verifier.records import Interval
from verifier.stats.intervals import _wilson_bounds, _z

__all__ = ["sign_flip_p", "paired_score_diff", "unit_mean_rate", "SIGN_FLIP_TEST", "SCORE_METHOD", "RATE_METHOD"]

SIGN_FLIP_TEST = "sign_flip_exact"
SCORE_METHOD = "newcombe_units"
RATE_METHOD = "wilson_units"
#: largest convolution support (sum of |differences| on the common denominator) computed exactly
_MAX_SUPPORT = 5_000_000


def _check_share(values: Sequence[float], what: str) -> list[float]:
    out = [float(v) for v in values]
    for v in out:
        if not (0.0 <= v <= 1.0) or math.isnan(v):
            raise ValueError(f"{what}: per-unit shares must lie in [0, 1], got {v}")
    return out


def sign_flip_p(differences: Sequence[Fraction | int]) -> float:
    """Exact two-sided p-value of the paired sign-flip test that the per-unit differences are centred on 0.

    ``differences`` are exact rationals (a unit's successes minus the other endpoint's, over its paired trials), so
    the null distribution of their sum is computed exactly on their common denominator: P(|S| >= |observed|) over all
    sign patterns of the non-zero differences. Units with difference 0 carry no information (as in McNemar's test).
    Returns 1.0 when no unit differs.
    """
    fracs = [Fraction(d) for d in differences]
    for d in fracs:
        if abs(d) > 1:
            raise ValueError(f"sign_flip_p: a per-unit difference of shares lies in [-1, 1], got {d}")
    nonzero = [d for d in fracs if d != 0]
    if not nonzero:
        return 1.0
    scale = math.lcm(*(d.denominator for d in nonzero))
    steps = [abs(int(d * scale)) for d in nonzero]
    observed = abs(sum(int(d * scale) for d in nonzero))
    total = sum(steps)
    if total > _MAX_SUPPORT:
        return _sign_flip_p_sampled(np.array([float(d) for d in nonzero]))
    # dist[i] = P(S = i - total) over random signs; each unit moves the sum by +step or -step with probability 1/2
    dist = np.zeros(2 * total + 1)
    dist[total] = 1.0
    for step in steps:
        shifted = np.zeros_like(dist)
        shifted[step:] += 0.5 * dist[:-step]
        shifted[:-step] += 0.5 * dist[step:]
        dist = shifted
    sums = np.arange(-total, total + 1)
    return float(min(1.0, dist[np.abs(sums) >= observed].sum()))


def _sign_flip_p_sampled(differences: np.ndarray, draws: int = 200_000, seed: int = 0) -> float:
    """Monte Carlo sign-flip p-value, ``(1 + hits) / (1 + draws)`` (valid, never 0), for supports too large to list
    (hundreds of units with many different trial counts)."""
    rng = np.random.default_rng(seed)
    observed = abs(float(differences.sum()))
    hits = 0
    for start in range(0, draws, 10_000):
        signs = rng.choice((-1.0, 1.0), size=(min(10_000, draws - start), differences.size))
        hits += int((np.abs(signs @ differences) >= observed - 1e-9).sum())
    return (1 + hits) / (1 + draws)


def paired_score_diff(reference: Sequence[float], candidate: Sequence[float], confidence: float = 0.95) -> Interval:
    """mean(candidate) - mean(reference) over paired units, with Newcombe's method 10 interval (n = units).

    Each value is one unit's success share in [0, 1] (0/1 with one trial). Never of zero width while n > 0: when
    every unit agrees the interval still spans what so few units cannot rule out (with 12 units all solved by both,
    about +-24 points).
    """
    ref = _check_share(reference, "paired_score_diff reference")
    cand = _check_share(candidate, "paired_score_diff candidate")
    if len(ref) != len(cand):
        raise ValueError(f"paired samples differ in length: {len(ref)} vs {len(cand)}")
    n = len(ref)
    if n == 0:
        return Interval(value=None, n=0, method=SCORE_METHOD)
    z = _z(confidence)
    k1, k2 = sum(cand), sum(ref)
    p1, p2 = k1 / n, k2 / n
    l1, u1 = _wilson_bounds_share(k1, n, z)
    l2, u2 = _wilson_bounds_share(k2, n, z)
    # the 2x2 table's cross-product difference n11*n00 - n10*n01, written so that it holds for shares too
    cross = n * sum(c * r for c, r in zip(cand, ref)) - k1 * k2
    if cross > n / 2:
        adj = cross - n / 2  # Newcombe's continuity adjustment of a positive phi
    elif cross < 0:
        adj = cross
    else:
        adj = 0.0
    denom = k1 * (n - k1) * k2 * (n - k2)
    phi = 0.0 if denom <= 0 else max(-1.0, min(1.0, adj / math.sqrt(denom)))
    theta = p1 - p2
    d_low = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    d_high = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return Interval(value=theta, low=max(-1.0, theta - d_low), high=min(1.0, theta + d_high), n=n,
                    method=SCORE_METHOD)


def unit_mean_rate(shares: Sequence[float], confidence: float = 0.95) -> Interval:
    """Mean of per-unit shares with the Wilson interval on n = units (value None for no units)."""
    values = _check_share(shares, "unit_mean_rate")
    n = len(values)
    if n == 0:
        return Interval(value=None, n=0, method=RATE_METHOD)
    k = sum(values)
    low, high = _wilson_bounds_share(k, n, _z(confidence))
    return Interval(value=k / n, low=low, high=high, n=n, method=RATE_METHOD)


def _wilson_bounds_share(k: float, n: int, z: float) -> tuple[float, float]:
    """Wilson bounds for a (possibly fractional) success count ``k`` of ``n``; exact 0 / 1 ends kept."""
    k = min(float(n), max(0.0, k))  # float sums of shares may overshoot n by an ulp
    if math.isclose(k, 0.0, abs_tol=1e-12):
        k = 0.0
    if math.isclose(k, float(n), rel_tol=0.0, abs_tol=1e-9):
        return _wilson_bounds(n, n, z)
    if k == 0.0:
        return _wilson_bounds(0, n, z)
    return _wilson_bounds(k, n, z)  # type: ignore[arg-type]  # the formula holds for a fractional k
