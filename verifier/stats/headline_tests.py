"""Intervals and tests for headline differences whose unit is not one Bernoulli pair per case.

Why a module of its own: the tool-call headlines (per-call schema validity, argument agreement, trigger F1 against
the reference's own run-to-run floor) are ratios of sums over clustered units (the calls of one case, the repeats
of one case), compared paired by case. Their honest interval needs two things the shared helpers in
:mod:`verifier.stats.intervals` do not give together:

* clustering: resample whole cases (a cluster bootstrap), paired: both sides of a case travel together;
* honesty at small n and at the edges: a bootstrap of zero spread is a zero-width interval, which would read as
  certainty from nothing. So every interval here is the *hull* of the bootstrap percentile interval and a
  score-based (Wilson) interval of the same difference (MOVER, Newcombe's square-and-add), which never has zero
  width while a denominator is finite.

The p-values match: :func:`hull_p` is the smallest level at which the hull excludes the null (the larger of the
bootstrap's and the score interval's), so "p < alpha" and "the (1 - alpha) interval excludes 0" agree. For a
paired ratio difference the exact randomization test (:func:`cluster_swap_p`: swap the two endpoints' answers
within a case) is used instead, enumerated exactly when few cases differ.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from verifier.stats.intervals import _wilson_bounds, _z

__all__ = ["f1_from_sums", "ratio_from_sums", "wilson_at", "jaccard_f1_at", "mover", "percentile_p", "hull_p",
           "hull_interval", "stratified_cluster_weights", "cluster_swap_p"]

#: Level function: confidence -> (estimate, low, high); None when it has no denominator.
LevelInterval = Callable[[float], tuple[float, float, float] | None]


def f1_from_sums(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """F1 = 2TP / (2TP + FP + FN), elementwise; NaN where nothing was triggered by either side."""
    denom = 2 * tp + fp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), np.nan)


def ratio_from_sums(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """k / n elementwise; NaN where n is 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, k / np.where(n > 0, n, 1), np.nan)


def wilson_at(k: int, n: int) -> LevelInterval:
    """The Wilson score interval of k/n as a function of the confidence level."""
    def at(conf: float) -> tuple[float, float, float] | None:
        if n <= 0:
            return None
        lo, hi = _wilson_bounds(k, n, _z(conf))
        return k / n, lo, hi
    return at


def jaccard_f1_at(tp: int, fp: int, fn: int) -> LevelInterval:
    """F1 through the Jaccard index J = TP/(TP+FP+FN), F1 = 2J/(1+J): a Wilson interval on J mapped monotonically,
    so a perfect F1 on few cases keeps a lower bound below 1."""
    m = tp + fp + fn

    def at(conf: float) -> tuple[float, float, float] | None:
        if m <= 0:
            return None
        lo, hi = _wilson_bounds(tp, m, _z(conf))
        f = lambda x: 2 * x / (1 + x)  # noqa: E731
        return f(tp / m), f(lo), f(hi)
    return at


def mover(a: LevelInterval, b: LevelInterval) -> LevelInterval:
    """a - b for independent estimates, by MOVER (Newcombe's square-and-add of each side's own interval)."""
    def at(conf: float) -> tuple[float, float, float] | None:
        x, y = a(conf), b(conf)
        if x is None or y is None:
            return None
        (pa, la, ua), (pb, lb, ub) = x, y
        d = pa - pb
        return d, d - math.hypot(pa - la, ub - pb), d + math.hypot(ua - pa, pb - lb)
    return at


def percentile_p(boot: np.ndarray, null: float = 0.0) -> float:
    """Two-sided p of the percentile bootstrap: the smallest level at which its interval excludes ``null``
    (with the +1 correction, so a finite bootstrap never claims p = 0)."""
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return 1.0
    b = boot.size
    below = (np.count_nonzero(boot <= null) + 1) / (b + 1)
    above = (np.count_nonzero(boot >= null) + 1) / (b + 1)
    return float(min(1.0, 2 * min(below, above)))


def _level_p(at: LevelInterval, null: float) -> float:
    """Smallest 1 - confidence at which the level interval excludes ``null`` (bisection on the level)."""
    inside = lambda c: (lambda r: r is None or r[1] <= null <= r[2])(at(c))  # noqa: E731
    lo, hi = 1e-9, 1 - 1e-12  # confidence levels
    if inside(lo):
        return 1.0
    if not inside(hi):
        return 1e-12
    for _ in range(60):
        mid = (lo + hi) / 2
        if inside(mid):
            hi = mid
        else:
            lo = mid
    return float(1 - hi)


def hull_p(boot: np.ndarray, score: LevelInterval, null: float = 0.0) -> float:
    """p-value of the hull interval: the larger of the bootstrap's and the score interval's."""
    return max(percentile_p(boot, null), _level_p(score, null))


def hull_interval(boot: np.ndarray, score: LevelInterval,
                  confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Hull of the bootstrap percentile interval and the score interval at ``confidence``."""
    fin = boot[np.isfinite(boot)]
    s = score(confidence)
    lows, highs = [], []
    if fin.size:
        a = (1 - confidence) / 2
        lo, hi = np.quantile(fin, [a, 1 - a])
        lows.append(float(lo))
        highs.append(float(hi))
    if s is not None:
        lows.append(s[1])
        highs.append(s[2])
    if not lows:
        return None, None
    return min(lows), max(highs)


#: Recently built weight matrices, by (strata, n_boot, seed): the scoring bootstraps several headlines of one suite
#: (and every candidate) on the same cases with the same seed, so the same matrix is asked for again and again.
_WEIGHTS: OrderedDict[tuple[bytes, str, int, int], np.ndarray] = OrderedDict()
_WEIGHTS_KEPT = 4


def stratified_cluster_weights(strata: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Cluster bootstrap as weights (n_boot x G: how often each cluster is drawn), whole clusters resampled with
    replacement *within* each stratum, so the number of clusters of each stratum (e.g. cases the reference
    answered twice) is the same in every replicate. Replicate sums of per-cluster totals are ``weights @ totals``.

    A pure function of its arguments, so the last few results are kept (read-only) and returned again.
    """
    strata = np.asarray(strata)
    key = (strata.tobytes(), strata.dtype.str, n_boot, seed)
    hit = _WEIGHTS.get(key)
    if hit is not None:
        _WEIGHTS.move_to_end(key)
        return hit
    rng = np.random.default_rng(seed)
    groups = np.unique(strata)
    weights = np.zeros((n_boot, strata.size)) if groups.size != 1 else None
    for s in groups:
        members = np.flatnonzero(strata == s)
        k = members.size
        draws = rng.integers(0, k, size=(n_boot, k))
        draws += (np.arange(n_boot) * k)[:, None]
        counts = np.bincount(draws.ravel(), minlength=n_boot * k).reshape(n_boot, k)
        if weights is None:  # one stratum: the counts are the whole matrix
            weights = counts.astype(np.float64)
        else:
            weights[:, members] = counts
    assert weights is not None
    weights.setflags(write=False)
    _WEIGHTS[key] = weights
    while len(_WEIGHTS) > _WEIGHTS_KEPT:
        _WEIGHTS.popitem(last=False)
    return weights


def cluster_swap_p(k_a: np.ndarray, n_a: np.ndarray, k_b: np.ndarray, n_b: np.ndarray,
                   n_perm: int = 4000, seed: int = 0, exact_up_to: int = 14) -> float:
    """Two-sided randomization p of kb/nb - ka/na (pooled ratios) = 0, pairs swapped within clusters.

    Under "no difference" the two endpoints' answers to a case are exchangeable, so swapping them within any
    subset of cases leaves the distribution unchanged. Enumerated exactly when at most ``exact_up_to`` cases
    differ (swapping an identical pair changes nothing), else ``n_perm`` random swaps with the +1 correction.
    """
    k_a, n_a, k_b, n_b = (np.asarray(x, dtype=float) for x in (k_a, n_a, k_b, n_b))
    if n_a.sum() <= 0 or n_b.sum() <= 0:
        return 1.0
    observed = k_b.sum() / n_b.sum() - k_a.sum() / n_a.sum()
    differ = np.flatnonzero((k_a != k_b) | (n_a != n_b))
    if differ.size == 0:
        return 1.0
    same_ka, same_na = k_a.sum() - k_a[differ].sum(), n_a.sum() - n_a[differ].sum()
    same_kb, same_nb = k_b.sum() - k_b[differ].sum(), n_b.sum() - n_b[differ].sum()
    da, dna, db, dnb = k_a[differ], n_a[differ], k_b[differ], n_b[differ]
    if differ.size <= exact_up_to:
        flips = np.array(list(itertools.product((0, 1), repeat=differ.size)), dtype=bool)
        exact = True
    else:
        flips = np.random.default_rng(seed).random((n_perm, differ.size)) < 0.5
        exact = False
    ka = same_ka + np.where(flips, db, da).sum(1)
    na = same_na + np.where(flips, dnb, dna).sum(1)
    kb = same_kb + np.where(flips, da, db).sum(1)
    nb = same_nb + np.where(flips, dna, dnb).sum(1)
    stat = ratio_from_sums(kb, nb) - ratio_from_sums(ka, na)
    stat = stat[np.isfinite(stat)]
    extreme = np.count_nonzero(np.abs(stat) >= abs(observed) - 1e-12)
    if exact:
        return float(min(1.0, extreme / max(stat.size, 1)))
    return float(min(1.0, (extreme + 1) / (stat.size + 1)))
