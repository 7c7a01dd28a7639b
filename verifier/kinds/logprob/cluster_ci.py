"""A confidence interval for a per-token mean whose tokens come in correlated clusters (a prompt's sequences).

Why not the plain cluster percentile bootstrap (``verifier.stats.intervals.bootstrap_mean``): per-token KL is
positive and right-skewed, and sequences differ in level, so the percentile bootstrap of the ratio mean covered
the true mean only 80-90 % of the time at 7-24 sequences (nominal 95 %). Here:

* the cluster is the **prompt** (case): the continuations sampled from one prompt share it, so their KL levels are
  correlated, and prompts are what a verdict generalises over (scoring passes the case id; the per-sequence
  clustering before issue 38 covered 81-89 % at 10-20 prompts x 3 sequences, ``benchmarks/kl_coverage.py``);
* the estimate is the ratio mean, sum of values / number of tokens, over clusters;
* its standard error is the linearised (cluster-robust) one, from the per-cluster residuals
  ``u_g = (sum_g - m * n_g) / mean(n)``;
* the interval is a **studentized** (bootstrap-t) one, resampling whole clusters, and the union of the
  equal-tailed and the symmetric bootstrap-t intervals: the equal-tailed one follows the skew, the symmetric one
  keeps the width when a small sample happens to look unskewed;
* ``log_scale`` (what KL uses: a positive mean): log(mean) is studentized instead (standard error se / mean) and the
  bounds mapped back. Misses were almost all on one side (the whole interval below the true KL, the side a false
  "KL is small" comes from); the log scale moves the top up where the sample is skewed;
* the **upper end is one-sided 99.5 %** (:data:`UPPER_TAIL`), the lower end stays one-sided 97.5 %: the upper end
  is what a ``consistent`` KL claim rests on ("the top is under the margin"), so it must miss (lie below the true
  KL) at most the 2.5 % a two-sided 95 % interval promises per side. With equal tails it missed 4.5-5.9 % at
  10-40 prompts in the 0.75 / 0.35 / 1.0 lognormal world of ``benchmarks/kl_coverage.py`` and 4.1-6.6 % with one
  sequence per prompt at log-sd 0.83 (verdict calibration: 4.8 % false ``consistent`` at the margin, 10 prompts).

Why a stricter upper level and not a small-sample factor: the one-sided miss hardly shrinks with the number of
prompts (harsh world: 5.5 % at 10, 4.5 % at 40), so it is not mainly a few-degrees-of-freedom effect. It is the
bootstrap's view of the tail: a sample that happens to lack the few high-KL prompts has a low mean *and* a low
spread, and its resamples cannot show it the tail it lacks, so the bootstrap-t's lower quantile is too mild exactly
when the top is too low. Measured (4,000 simulations per cell, upper misses at 10 / 12 / 20 / 40 prompts, harsh
world): the t-quantile scaled by sqrt(g / (g - 1)) 4.8 / 5.2 / 4.9 / 4.4 %, by t_{g-1} / z 3.8 / 4.2 / 4.4 / 4.0 %
(the factor fades with g, the miss does not); one-sided 98.75 % 3.4 / 3.3 / 3.0 / 2.8 %, 99.25 %
2.5 / 2.2 / 2.2 / 1.9 %, **99.5 % 1.8 / 1.6 / 1.6 / 1.4 %** (2.1 / 1.9 / 1.9 / 1.5 % in the heavier one-sequence
world). 99.5 % is the least strict of these levels that stays under 2.5 % with room for the simulation's error in
every world measured. The lower end (what ``differs`` rests on) is unchanged, so ``differs`` decisions are the same,
bit for bit; the price is a higher top (harsh world, median: 2.9x the estimate instead of 2.0x at 10 prompts, 1.57x
instead of 1.38x at 40), i.e. fewer ``consistent`` for a true KL just under the margin.

Below :data:`MIN_CLUSTERS` clusters there is an estimate but no interval at all (the verdict reads that as "not
testable", never as zero width); the verdict's KL minimum (``[verdict.min_units] kl_mean``) is the same number.
Measured coverage (``benchmarks/kl_coverage.py``, 4,000 simulations per cell; the table is in docs/verdict.md) is
97.7-98.4 % from 10 prompts in every world measured there (nominally 97 %: 2.5 % below, 0.5 % above; with equal
tails 93.5-97.0 %, 8 prompts 92.9 %). A heavier world (one sequence per prompt, log-sd 1.0) still misses low 2.6 %.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from verifier.records import Interval

#: Below this many clusters (prompts) no interval is given: the smallest count whose measured coverage was at
#: least 93 % in every world of benchmarks/kl_coverage.py (8 prompts: 92.9 %). Also the verdict's KL minimum.
MIN_CLUSTERS = 10
METHOD = "cluster_bootstrap_t"
#: One-sided level of the interval's upper end (the lower end keeps (1 - confidence) / 2): see the module docstring.
UPPER_TAIL = 0.005


def _cluster_sums(values: np.ndarray, clusters: Sequence[Hashable] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _, codes = np.unique(np.asarray(clusters), return_inverse=True)
    sums = np.bincount(codes, weights=values)
    counts = np.bincount(codes).astype(np.float64)
    return sums, counts


def ratio_mean_se(sums: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """Ratio mean and its cluster-robust (linearised) standard error, over the clusters' sums and counts."""
    g = sums.size
    m = float(sums.sum() / counts.sum())
    if g < 2:
        return m, 0.0
    u = (sums - m * counts) / counts.mean()
    return m, float(np.sqrt(u.var(ddof=1) / g))


def bootstrap_t_bounds(sums: np.ndarray, counts: np.ndarray, *, n_boot: int = 1999, seed: int = 0,
                       confidence: float = 0.95, log_scale: bool = False,
                       upper_tail: float | None = UPPER_TAIL) -> tuple[float, float, float]:
    """(mean, low, high): union of the equal-tailed and symmetric cluster bootstrap-t bounds, per end.

    ``log_scale``: studentize log(mean) (standard error se / mean) and map the bounds back (positive means only).
    ``upper_tail``: the one-sided level of ``high`` (its t-quantile and the |t| quantile at 1 - 2 upper_tail);
    None: the same as the lower end's, (1 - confidence) / 2 (equal tails, the method before the upper-end fix).
    """
    g = sums.size
    m, se = ratio_mean_se(sums, counts)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, g, size=(n_boot, g))
    s_b, c_b = sums[pick], counts[pick]
    m_b = s_b.sum(axis=1) / c_b.sum(axis=1)
    u_b = (s_b - m_b[:, None] * c_b) / c_b.mean(axis=1)[:, None]
    se_b = np.sqrt(u_b.var(axis=1, ddof=1) / g)
    ok = se_b > 1e-12 * np.abs(m_b)  # a resample of identical clusters has no spread (only rounding) to studentize
    if se <= 0 or not ok.any():
        # every sequence has the same mean: no spread to studentize; fall back to the resampled range
        return m, float(m_b.min()), float(m_b.max())
    log_scale = log_scale and m > 0 and bool((m_b > 0).all())
    if log_scale:
        theta, se_t = float(np.log(m)), se / m
        t = (np.log(m_b[ok]) - theta) / (se_b[ok] / m_b[ok])
    else:
        theta, se_t = m, se
        t = (m_b[ok] - m) / se_b[ok]
    a = (1.0 - confidence) / 2.0
    b = a if upper_tail is None else upper_tail
    t_hi, t_lo = np.quantile(t, [1.0 - a, b])
    abs_lo, abs_hi = np.quantile(np.abs(t), [1.0 - 2.0 * a, 1.0 - 2.0 * b])
    low = min(theta - float(t_hi) * se_t, theta - float(abs_lo) * se_t)
    high = max(theta - float(t_lo) * se_t, theta + float(abs_hi) * se_t)
    if log_scale:  # a near-degenerate resample can make t huge: keep the bound finite (it then says nothing anyway)
        top = float(np.log(np.finfo(np.float64).max)) - 1.0
        return m, float(np.exp(min(low, top))), float(np.exp(min(high, top)))
    return m, low, high


def cluster_mean_interval(values: Sequence[float] | np.ndarray, clusters: Sequence[Hashable] | np.ndarray, *,
                          n_boot: int = 1999, seed: int = 0, confidence: float = 0.95,
                          min_clusters: int = MIN_CLUSTERS, method_prefix: str = "",
                          floor: float | None = None, log_scale: bool = False,
                          upper_tail: float | None = UPPER_TAIL) -> Interval:
    """Per-token mean with a cluster bootstrap-t interval; ``n`` is the number of tokens.

    ``upper_tail``: the upper end's one-sided level (:func:`bootstrap_t_bounds`).
    ``floor``: a bound the quantity cannot cross (0 for KL): the interval is clipped to it.
    Fewer than ``min_clusters`` clusters: the estimate only (``low``/``high`` None), method says why.
    """
    arr = np.asarray(values, dtype=np.float64)
    method = f"{method_prefix}{METHOD}"
    if arr.size == 0:
        return Interval(value=None, n=0, method=method)
    sums, counts = _cluster_sums(arr, clusters)
    if sums.size < min_clusters:
        return Interval(value=float(arr.mean()), n=int(arr.size),
                        method=f"{method}: no interval below {min_clusters} clusters ({sums.size})")
    m, low, high = bootstrap_t_bounds(sums, counts, n_boot=n_boot, seed=seed, confidence=confidence,
                                      log_scale=log_scale, upper_tail=upper_tail)
    if floor is not None:
        low, high = max(low, floor), max(high, floor)
    return Interval(value=m, low=low, high=high, n=int(arr.size), method=method)

