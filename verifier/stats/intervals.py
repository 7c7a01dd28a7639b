"""Shared statistics: every rate and difference a user sees comes out of here as an :class:`Interval`.

Why one module: the report, the gate and history compare figures across suites and runs, so they must
all be computed the same way (same interval method, same confidence level, same handling of n = 0).
All intervals are two-sided 95% unless ``confidence`` says otherwise.

Conventions
- A rate with n = 0 has ``value=None`` (unknown), never 0: a zero denominator is not a zero rate.
- Paired differences are *b minus a* (candidate minus reference when called as ``(ref, cand)``).
- Percentiles take percentages in [0, 100] (numpy's convention) and return keys like ``"p50"``, ``"p99.9"``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from statistics import NormalDist

import numpy as np

from verifier.records import Interval

__all__ = [
    "wilson",
    "newcombe_paired_diff",
    "newcombe_unpaired_diff",
    "mcnemar",
    "bootstrap_mean",
    "paired_bootstrap_diff",
    "percentiles",
    "cluster_robust_diff",
    "cluster_robust_p",
    "rate",
]


def _z(confidence: float) -> float:
    """Two-sided normal quantile for a confidence level (1.959964 for 0.95)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)


def _wilson_bounds(k: int, n: int, z: float) -> tuple[float, float]:
    """Wilson score bounds; well-behaved at k = 0 and k = n, unlike the Wald interval."""
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = (z / denom) * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    # at k = 0 (k = n) the lower (upper) bound is exactly 0 (1); rounding must not move it off the boundary
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def wilson(k: int, n: int, confidence: float = 0.95) -> Interval:
    """Proportion k/n with its Wilson score interval.

    Wilson rather than Wald because our rates often sit at 0 or 1 (a perfect endpoint, a broken one)
    where Wald collapses to a zero-width interval and overstates certainty.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return Interval(value=None, low=None, high=None, n=0, method="wilson")
    lo, hi = _wilson_bounds(k, n, _z(confidence))
    return Interval(value=k / n, low=lo, high=hi, n=n, method="wilson")


def rate(flags: Sequence[bool], confidence: float = 0.95) -> Interval:
    """Convenience: Wilson interval for the share of True in ``flags``."""
    return wilson(sum(1 for f in flags if f), len(flags), confidence)


def _paired_table(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int, int, int]:
    """(both, a only, b only, neither) counts for paired booleans."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    n11 = n10 = n01 = n00 = 0
    for x, y in zip(a, b):
        if x and y:
            n11 += 1
        elif x:
            n10 += 1
        elif y:
            n01 += 1
        else:
            n00 += 1
    return n11, n10, n01, n00


def newcombe_paired_diff(a: Sequence[bool], b: Sequence[bool], confidence: float = 0.95) -> Interval:
    """Difference of two correlated proportions, p(b) - p(a), with Newcombe's (1998) method 10 interval.

    The same cases are run on both endpoints, so the two rates are correlated; treating them as
    independent would give intervals that are far too wide. Method 10 combines the two marginal
    Wilson intervals with the phi correlation of the paired 2x2 table.
    """
    n11, n10, n01, n00 = _paired_table(a, b)
    n = n11 + n10 + n01 + n00
    if n == 0:
        return Interval(value=None, n=0, method="newcombe")
    z = _z(confidence)
    # Newcombe writes theta = p1 - p2; here p1 is b's rate and p2 is a's so theta = b - a.
    p1 = (n11 + n01) / n
    p2 = (n11 + n10) / n
    l1, u1 = _wilson_bounds(n11 + n01, n, z)
    l2, u2 = _wilson_bounds(n11 + n10, n, z)
    # In the table for (b, a): "b only" = n01, "a only" = n10.
    rows1, rows0 = n11 + n01, n10 + n00  # b true / b false
    cols1, cols0 = n11 + n10, n01 + n00  # a true / a false
    denom = rows1 * rows0 * cols1 * cols0
    # Newcombe's phi carries a continuity adjustment: a positive cross-product difference is reduced
    # by n/2 (floored at 0); a negative one is used as is.
    cross = n11 * n00 - n01 * n10
    if cross > n / 2:
        adj = cross - n / 2
    elif cross < 0:
        adj = float(cross)
    else:
        adj = 0.0
    phi = 0.0 if denom == 0 else adj / math.sqrt(denom)
    theta = p1 - p2
    d_low = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    d_high = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return Interval(value=theta, low=max(-1.0, theta - d_low), high=min(1.0, theta + d_high), n=n, method="newcombe")


def newcombe_unpaired_diff(k1: int, n1: int, k2: int, n2: int, confidence: float = 0.95) -> Interval:
    """Difference of independent proportions k2/n2 - k1/n1 (Newcombe's hybrid score, method 10 of 1998b).

    For comparisons where cases do not line up one-to-one (e.g. different suite versions).
    """
    if n1 == 0 or n2 == 0:
        return Interval(value=None, n=min(n1, n2), method="newcombe_unpaired")
    z = _z(confidence)
    p1, p2 = k2 / n2, k1 / n1
    l1, u1 = _wilson_bounds(k2, n2, z)
    l2, u2 = _wilson_bounds(k1, n1, z)
    theta = p1 - p2
    low = theta - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = theta + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Interval(value=theta, low=low, high=high, n=min(n1, n2), method="newcombe_unpaired")


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Exact (binomial) McNemar p-value for paired booleans.

    Only discordant pairs carry information; with few of them (the usual case when an endpoint is
    nearly right) the chi-square approximation is badly off, so the exact test is used. Returns 1.0
    when there are no discordant pairs.
    """
    _, n10, n01, _ = _paired_table(a, b)
    m = n10 + n01
    if m == 0:
        return 1.0
    from scipy.stats import binomtest  # here, not at import: scipy.stats costs ~0.5 s and most runs never test

    return float(binomtest(n01, m, 0.5, alternative="two-sided").pvalue)


def _as_float_array(values: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{what}: expected a flat sequence of numbers")
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: values must be finite numbers")
    return arr


def _cluster_codes(clusters: Sequence[Hashable] | np.ndarray, n: int) -> tuple[np.ndarray, int]:
    if len(clusters) != n:
        raise ValueError(f"clusters has {len(clusters)} labels for {n} values")
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(c, len(index)) for c in clusters), dtype=np.int64, count=n)
    return codes, len(index)


def _percentile_ci(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(boot, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def bootstrap_mean(values: Sequence[float] | np.ndarray, clusters: Sequence[Hashable] | np.ndarray | None = None,
                   n_boot: int = 2000, seed: int = 0, confidence: float = 0.95) -> Interval:
    """Mean with a percentile-bootstrap interval; with ``clusters``, whole clusters are resampled.

    Cluster resampling matters for agent suites and repeats: steps of one scenario (or repeats of one
    case) are not independent, and resampling them individually makes the interval too narrow.
    The estimate is the ratio mean (sum of values / number of values) over the resampled clusters.
    """
    arr = _as_float_array(values, "bootstrap_mean")
    n = int(arr.size)
    method = "bootstrap" if clusters is None else "cluster_bootstrap"
    if n == 0:
        return Interval(value=None, n=0, method=method)
    mean = float(arr.mean())
    rng = np.random.default_rng(seed)
    if clusters is None:
        if n == 1:
            return Interval(value=mean, low=mean, high=mean, n=1, method=method)
        idx = rng.integers(0, n, size=(n_boot, n))
        boot = arr[idx].mean(axis=1)
    else:
        codes, g = _cluster_codes(clusters, n)
        sums = np.bincount(codes, weights=arr, minlength=g)
        counts = np.bincount(codes, minlength=g).astype(float)
        if g == 1:
            return Interval(value=mean, low=mean, high=mean, n=n, method=method)
        pick = rng.integers(0, g, size=(n_boot, g))
        boot = sums[pick].sum(axis=1) / counts[pick].sum(axis=1)
    lo, hi = _percentile_ci(boot, confidence)
    return Interval(value=mean, low=lo, high=hi, n=n, method=method)


def paired_bootstrap_diff(values_a: Sequence[float], values_b: Sequence[float],
                          clusters: Sequence[Hashable] | None = None, n_boot: int = 2000, seed: int = 0,
                          confidence: float = 0.95) -> Interval:
    """mean(b - a) over paired units with a (cluster) bootstrap interval; for continuous paired metrics."""
    a = _as_float_array(values_a, "paired_bootstrap_diff a")
    b = _as_float_array(values_b, "paired_bootstrap_diff b")
    if a.size != b.size:
        raise ValueError(f"paired samples differ in length: {a.size} vs {b.size}")
    res = bootstrap_mean((b - a).tolist(), clusters=clusters, n_boot=n_boot, seed=seed, confidence=confidence)
    return res.model_copy(update={"method": "paired_bootstrap" if clusters is None else "paired_cluster_bootstrap"})


def _q_key(q: float) -> str:
    text = f"{q:.6f}".rstrip("0").rstrip(".")
    return f"p{text}"


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 95, 99)) -> dict[str, float]:
    """Percentiles (linear interpolation, numpy's default) keyed ``"p50"``, ``"p95"``, ``"p99.9"``.

    ``qs`` are percentages in [0, 100]. Returns an empty dict for no values: an absent latency is not
    a zero latency.
    """
    arr = _as_float_array(values, "percentiles")
    for q in qs:
        if not 0.0 <= float(q) <= 100.0:
            raise ValueError(f"percentiles: q must be within [0, 100], got {q}")
    if arr.size == 0:
        return {}
    out = np.percentile(arr, [float(q) for q in qs])
    return {_q_key(float(q)): float(v) for q, v in zip(qs, out)}


def cluster_robust_diff(values_a: Sequence[float], values_b: Sequence[float], clusters: Sequence[Hashable],
                        confidence: float = 0.95) -> Interval:
    """mean(b - a) over paired units, with a cluster-robust (CR1) standard error and a t interval on G-1 df.

    Use when units come in correlated groups (steps within a scenario, repeats of a case): the
    sandwich variance sums residuals within each cluster first, so within-cluster correlation widens
    the interval as it should. Needs at least two clusters for an interval.
    """
    a = _as_float_array(values_a, "cluster_robust_diff a")
    b = _as_float_array(values_b, "cluster_robust_diff b")
    if a.size != b.size:
        raise ValueError(f"paired samples differ in length: {a.size} vs {b.size}")
    n = int(a.size)
    if n == 0:
        return Interval(value=None, n=0, method="cluster_robust")
    d = b - a
    mean = float(d.mean())
    codes, g = _cluster_codes(clusters, n)
    if g < 2:
        return Interval(value=mean, low=None, high=None, n=n, method="cluster_robust")
    resid_sums = np.bincount(codes, weights=d - mean, minlength=g)
    var = (g / (g - 1)) * float(np.sum(resid_sums**2)) / (n * n)
    se = math.sqrt(var)
    from scipy.stats import t as student_t

    t = float(student_t.ppf(1.0 - (1.0 - confidence) / 2.0, df=g - 1))
    return Interval(value=mean, low=mean - t * se, high=mean + t * se, n=n, method="cluster_robust")


def cluster_robust_p(values_a: Sequence[float], values_b: Sequence[float],
                     clusters: Sequence[Hashable]) -> float | None:
    """Two-sided p-value of the CR1 t test that mean(b - a) = 0 (the test behind :func:`cluster_robust_diff`).

    ``None`` with fewer than two clusters; with zero spread, 1.0 for a zero mean and 0.0 otherwise.
    """
    a = _as_float_array(values_a, "cluster_robust_p a")
    b = _as_float_array(values_b, "cluster_robust_p b")
    if a.size != b.size:
        raise ValueError(f"paired samples differ in length: {a.size} vs {b.size}")
    if a.size == 0:
        return None
    d = b - a
    mean = float(d.mean())
    codes, g = _cluster_codes(clusters, int(d.size))
    if g < 2:
        return None
    resid_sums = np.bincount(codes, weights=d - mean, minlength=g)
    se = math.sqrt((g / (g - 1)) * float(np.sum(resid_sums**2)) / (d.size * d.size))
    if se == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    from scipy.stats import t as student_t

    return float(2.0 * student_t.sf(abs(mean) / se, df=g - 1))
