"""KL statistics as llama.cpp's ``--kl-divergence`` prints them, with sequence-level confidence intervals.

Input: one row per aligned, teacher-forced token position (KL from :mod:`verifier.kinds.logprob.estimator`,
the log-probabilities both sides gave the *actual* reference token, whether their top-1 agree) plus
the sequence it belongs to. Positions of one sequence are strongly correlated (a quantization error
early in a prompt shifts every later position), so every interval resamples whole sequences
(cluster bootstrap from ``verifier.stats.intervals``), never single tokens.

Top-k input (an API's top-k logprobs) gives no unbiased KL: the union + tail-bucket estimate is in practice
69-85 % of the exact KL at k = 20 (21 % with a noisy tail), so such paths report only the guaranteed lower
bound (``kl_topk_lower``) and the reference's mass outside its top-k (``kl_tail_mass``), never ``kl_mean``.
``kl_mean`` is reserved for exact (full distributions) and sampled-token (k3) per-token KL, with the cluster
bootstrap-t interval of :mod:`verifier.kinds.logprob.cluster_ci` (coverage measured >= 93 %).

Definitions (llama.cpp's): Δp = p_candidate(token) - p_reference(token) in probability (not log)
space; "same top" = both top-1 tokens agree; ln(PPL ratio) = mean over tokens of
ln p_reference(token) - ln p_candidate(token), i.e. ln(PPL(candidate) / PPL(reference)).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, Field

from verifier.kinds.logprob.cluster_ci import cluster_mean_interval
from verifier.records import Interval
from verifier.run.summary import Series
from verifier.stats.intervals import bootstrap_mean

KL_PERCENTILES: tuple[float, ...] = (99.9, 99, 95, 90, 50, 10, 5, 1)
DP_PERCENTILES: tuple[float, ...] = (99.9, 99, 95, 90, 75, 50, 25, 10, 5, 1, 0.1)


class KLStats(BaseModel):
    """Everything llama.cpp prints for one candidate vs the reference; intervals carry their n."""

    n_positions: int
    n_sequences: int
    n_clusters: int | None = None  # the intervals' independent units (prompts); None in summaries before issue 38
    kl_mean: Interval  # top-k input: the union estimate's mean, kept for the record only (never a metric)
    topk: bool = False  # the per-position KL came from top-k lists (a lower bound is all that is reported)
    kl_topk_lower: Interval | None = None  # mean of the guaranteed per-position lower bound (top-k input)
    kl_tail_mass: Interval | None = None  # reference's probability mass outside its top-k (top-k input)
    kl_max: float | None = None
    kl_min: float | None = None
    kl_percentiles: dict[str, float] = Field(default_factory=dict)  # "p99.9" ... "p1"
    kl_lower_mean: float | None = None  # mean of the truncation lower bound (top-k input only)
    delta_p_mean: Interval | None = None
    delta_p_rms: Interval | None = None
    delta_p_max: float | None = None
    delta_p_min: float | None = None
    delta_p_percentiles: dict[str, float] = Field(default_factory=dict)
    same_top: Interval | None = None
    ln_ppl_ratio: Interval | None = None
    ppl_ratio: float | None = None
    ln_ppl_correlation: float | None = None  # Cor(ln PPL(candidate), ln PPL(reference)) over sequences

    def metrics(self) -> dict[str, Interval]:
        """The summary metrics (names per CONTRACTS.md, plus the other llama.cpp figures, additive)."""
        n = self.n_positions
        out: dict[str, Interval] = {}
        if self.topk:  # no point estimate of KL from top-k lists: the lower bound and the tail it cannot see
            if self.kl_topk_lower is not None:
                out["kl_topk_lower"] = self.kl_topk_lower
            if self.kl_tail_mass is not None:
                out["kl_tail_mass"] = self.kl_tail_mass
        else:
            out["kl_mean"] = self.kl_mean
            for key, val in self.kl_percentiles.items():
                name = "kl_median" if key == "p50" else f"kl_{key}"
                out[name] = Interval(value=val, n=n, method="percentile")
            if self.kl_max is not None:
                out["kl_max"] = Interval(value=self.kl_max, n=n, method="max")
        for name in ("same_top", "delta_p_rms", "delta_p_mean", "ln_ppl_ratio"):
            val = getattr(self, name)
            if val is not None:
                out[name] = val
        return out


def _finite(arr: np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(arr, dtype=np.float64)
    if arr.size and not np.isfinite(arr).all():
        raise ValueError(f"{what}: non-finite values (exclude unaligned positions before computing statistics)")
    return arr


def _pcts(arr: np.ndarray, qs: tuple[float, ...]) -> dict[str, float]:
    vals = np.percentile(arr, qs)
    return {f"p{q:g}": float(v) for q, v in zip(qs, vals)}


def _sqrt_interval(iv: Interval) -> Interval:
    """RMS from a mean of squares: sqrt is monotone, so the interval maps through it."""
    def f(v: float | None) -> float | None:
        return None if v is None else math.sqrt(max(v, 0.0))

    return Interval(value=f(iv.value), low=f(iv.low), high=f(iv.high), n=iv.n, method=iv.method)


def kl_statistics(kl: np.ndarray, seq: np.ndarray, *, ref_token_logprob: np.ndarray | None = None,
                  cand_token_logprob: np.ndarray | None = None, same_top: np.ndarray | None = None,
                  kl_lower: np.ndarray | None = None, tail_mass: np.ndarray | None = None, topk: bool = False,
                  method: str = "", n_boot: int = 2000, seed: int = 0,
                  clusters: np.ndarray | None = None) -> KLStats:
    """Statistics over aligned positions; ``seq`` labels each position's sequence.

    ``clusters`` labels each position's independent unit, what every interval resamples: the prompt, when several
    sequences (sampled continuations) share one and are correlated through it; default: the sequence.

    ``topk``: ``kl`` is the top-k union estimate; ``kl_lower`` (its guaranteed lower bound) and ``tail_mass``
    become the reported figures. ``method`` prefixes the KL interval's method (``exact_``, ``sampled_k3_``).
    """
    kl = _finite(kl, "kl")
    seq = np.asarray(seq)
    if seq.shape != kl.shape:
        raise ValueError(f"seq labels {seq.shape} do not match kl values {kl.shape}")
    n = int(kl.size)
    units = seq if clusters is None else np.asarray(clusters)
    if units.shape != kl.shape:
        raise ValueError(f"cluster labels {units.shape} do not match kl values {kl.shape}")
    n_seq = int(np.unique(seq).size) if n else 0
    n_units = int(np.unique(units).size) if n else 0
    if n == 0:
        return KLStats(n_positions=0, n_sequences=0, n_clusters=0,
                       kl_mean=Interval(value=None, n=0, method="cluster_bootstrap_t"), topk=topk)

    def boot(values: np.ndarray) -> Interval:
        return bootstrap_mean(values, clusters=units, n_boot=n_boot, seed=seed)

    def mean_ci(values: np.ndarray, prefix: str) -> Interval:
        # log scale: per-token KL (and its bound, the tail mass) is positive and right-skewed; measured to cover
        # better at few prompts (benchmarks/kl_coverage.py)
        return cluster_mean_interval(values, units, n_boot=n_boot, seed=seed, method_prefix=prefix, floor=0.0,
                                     log_scale=True)

    st = KLStats(n_positions=n, n_sequences=n_seq, n_clusters=n_units, kl_mean=mean_ci(kl, method),
                 kl_max=float(kl.max()),
                 kl_min=float(kl.min()), kl_percentiles=_pcts(kl, KL_PERCENTILES), topk=topk)
    if kl_lower is not None:
        low = _finite(kl_lower, "kl_lower")
        st.kl_lower_mean = float(low.mean())
        if topk:
            st.kl_topk_lower = mean_ci(low, "topk_lower_bound_")
    if tail_mass is not None and topk:
        st.kl_tail_mass = mean_ci(_finite(tail_mass, "tail_mass"), "")
    if ref_token_logprob is not None and cand_token_logprob is not None:
        lr = _finite(ref_token_logprob, "reference token logprob")
        lc = _finite(cand_token_logprob, "candidate token logprob")
        dp = np.exp(lc) - np.exp(lr)
        st.delta_p_mean = boot(dp)
        st.delta_p_rms = _sqrt_interval(boot(dp * dp))
        st.delta_p_max, st.delta_p_min = float(dp.max()), float(dp.min())
        st.delta_p_percentiles = _pcts(dp, DP_PERCENTILES)
        st.ln_ppl_ratio = boot(lr - lc)
        st.ppl_ratio = float(math.exp(st.ln_ppl_ratio.value)) if st.ln_ppl_ratio.value is not None else None
        if n_seq >= 3:
            _, codes = np.unique(seq, return_inverse=True)
            cnt = np.bincount(codes)
            a = np.bincount(codes, weights=-lr) / cnt
            b = np.bincount(codes, weights=-lc) / cnt
            if a.std() > 0 and b.std() > 0:
                st.ln_ppl_correlation = float(np.corrcoef(a, b)[0, 1])
    if same_top is not None:
        same = np.asarray(same_top, dtype=np.float64)
        st.same_top = boot(same)
        st.same_top.method = "cluster_bootstrap"
    return st


def kl_cdf_series(kl: np.ndarray, name: str, points: int = 64) -> Series:
    """Empirical CDF of per-position KL at ``points`` quantiles (x = KL in nats, y = fraction <= x)."""
    kl = np.asarray(kl, dtype=np.float64)
    if kl.size == 0:
        return Series(name=name, x=[], y=[], x_label="KL (nats)", y_label="fraction of positions")
    ys = np.linspace(0.0, 1.0, points)
    xs = np.quantile(kl, ys)
    return Series(name=name, x=[float(x) for x in xs], y=[float(y) for y in ys], x_label="KL (nats)",
                  y_label="fraction of positions")
