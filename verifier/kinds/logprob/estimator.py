"""KL(reference || candidate) per token position, from top-k logprobs or from full distributions.

Endpoints return only the top-k log-probabilities at each position, so the two distributions are known
on different token sets. We estimate over the *union* of both top-k sets plus one explicit *tail
bucket* holding the mass neither list covers:

* tokens in both lists (I) use both known probabilities;
* a reference top-k token the candidate did not list (set A) has an unknown candidate probability
  that is at most the candidate's k-th probability and at most its tail mass ``T_q``: we impute
  ``min(q_kth, T_q / (|A| + 1))`` (the ``+1`` leaves mass for the rest of the tail); symmetrically
  for candidate tokens the reference did not list (set C);
* the tail bucket gets what is left of each side's mass, so both imputed distributions sum to 1 and
  the point estimate is itself a KL (never negative).

The truncation allows a rigorous **lower bound** only: merging A, C and the rest of the vocabulary
into three cells is a coarsening, so by the data-processing inequality its KL is <= the true KL, and
we take the minimum over the unknown cell masses (q(A), p(C)) within their constraints (a convex
problem in two variables, solved exactly by clipped coordinate descent). There is no finite upper
bound: a token in the reference's top-k may have arbitrarily small candidate probability. The
point estimate's error against exact KL is measured at k = 5, 10, 20 (``benchmarks/kl_accuracy.py``).

Everything is vectorised over positions; ids are integers (``align`` maps token strings to ids),
padding is id ``-1`` with logprob ``-inf``.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

#: Smallest tail mass used in the imputation, so a side whose top-k sums to ~1 (rounding) stays finite.
TAIL_FLOOR = 1e-10
#: Rows processed per chunk: keeps the [chunk, k, k] id-comparison cube in cache-friendly sizes.
CHUNK_ROWS = 32768


@dataclass(frozen=True)
class TopK:
    """Top-k logprobs at N positions: ``ids`` int64 [N, k] (-1 = padding), ``logprobs`` float [N, k]."""

    ids: np.ndarray
    logprobs: np.ndarray

    def __post_init__(self) -> None:
        if self.ids.shape != self.logprobs.shape or self.ids.ndim != 2:
            raise ValueError(f"TopK ids {self.ids.shape} and logprobs {self.logprobs.shape} must both be [N, k]")

    @property
    def n(self) -> int:
        return int(self.ids.shape[0])


@dataclass(frozen=True)
class TopKKL:
    """Per-position results of :func:`topk_kl` (all float64 [N])."""

    kl: np.ndarray  # point estimate (union + tail bucket)
    lower: np.ndarray  # rigorous lower bound from the coarsening
    ref_tail: np.ndarray  # reference mass outside its top-k
    cand_tail: np.ndarray  # candidate mass outside its top-k
    overlap: np.ndarray  # |top-k(ref) ∩ top-k(cand)|, int


def exact_kl(ref_logp: np.ndarray, cand_logp: np.ndarray) -> np.ndarray:
    """Exact KL(p || q) per row from full log-distributions [N, V] (0 log 0 = 0; p > 0 = q gives inf)."""
    ref_logp = np.asarray(ref_logp, dtype=np.float64)
    cand_logp = np.asarray(cand_logp, dtype=np.float64)
    p = np.exp(ref_logp)
    with np.errstate(invalid="ignore"):
        terms = np.where(p > 0, p * (ref_logp - cand_logp), 0.0)
    return terms.sum(axis=-1)


def topk_from_full(logp: np.ndarray, k: int) -> TopK:
    """The top-k (sorted, descending) of full log-distributions [N, V]: what an API would return."""
    logp = np.asarray(logp)
    idx = np.argpartition(-logp, kth=min(k, logp.shape[1]) - 1, axis=1)[:, :k]
    vals = np.take_along_axis(logp, idx, axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")
    return TopK(ids=np.take_along_axis(idx, order, axis=1).astype(np.int64),
                logprobs=np.take_along_axis(vals, order, axis=1).astype(np.float64))


def _xlogx_over(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * log(a / b) with 0 log 0 = 0 (b is floored positive by the callers)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = a * (np.log(a) - np.log(b))
    return np.where(a > 0, out, 0.0)


def _lower_bound(a: np.ndarray, c: np.ndarray, tp: np.ndarray, tq: np.ndarray,
                 x_max: np.ndarray, y_max: np.ndarray, known: np.ndarray, iters: int = 5) -> np.ndarray:
    """min over x = q(A) in [0, x_max], y = p(C) in [0, y_max] of the 3-cell KL, plus the known part.

    f(x, y) = a log(a/x) + y log(y/c) + (tp - y) log((tp - y)/(tq - x)); the stationary conditions give
    x = a tq / (a + tp - y) and y = c tp / (c + tq - x); clipping each to its box is the exact 1-D
    minimiser, and alternating them converges for this jointly convex function. A few sweeps get
    close; to stay a *guaranteed* bound after finitely many, we subtract the Frank-Wolfe gap
    max over the box of grad f . (z_k - z), which bounds f(z_k) - min f for a convex f.
    """
    y = np.zeros_like(a)
    x = np.zeros_like(a)
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(iters):
            den = a + tp - y
            x = np.clip(np.where(den > 0, a * tq / np.where(den > 0, den, 1.0), 0.0), 0.0, x_max)
            den = c + tq - x
            y = np.clip(np.where(den > 0, c * tp / np.where(den > 0, den, 1.0), 0.0), 0.0, y_max)
        pb = np.maximum(tp - y, 0.0)
        qb = np.maximum(tq - x, TAIL_FLOOR)
        xs = np.maximum(x, TAIL_FLOOR)
        f = _xlogx_over(a, xs) + _xlogx_over(y, np.maximum(c, TAIL_FLOOR)) + _xlogx_over(pb, qb)
        gx = -a / xs + pb / qb
        gy = np.where((c > 0) & (y > 0), np.log(np.maximum(y, TAIL_FLOOR) / np.maximum(c, TAIL_FLOOR))
                      - np.log(np.maximum(pb, TAIL_FLOOR) / qb), 0.0)
        gy = np.where((c > 0) & (y <= 0) & (y_max > 0), -np.inf, gy)  # at the y = 0 edge: no finite guarantee
        gap = np.maximum(gx * x, gx * (x - x_max)) + np.maximum(gy * y, gy * (y - y_max))
        lower = known + f - np.maximum(gap, 0.0)
    return np.maximum(np.nan_to_num(lower, nan=0.0, neginf=0.0), 0.0)


def _sorted_union(r_ids: np.ndarray, c_ids: np.ndarray, absent: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Put both lists of each row in id order without a [k, k] comparison cube (too slow at 1M rows).

    Slots are the reference columns, then the candidate's; each gets the key ``id << bits | column``.
    One in-row sort of plain integers (much faster than argsort) puts equal ids side by side,
    reference first. ``absent`` slots get unique ids that never match. Returns the column of each
    sorted slot and ``same[:, s]`` = slots s and s + 1 share an id.
    """
    n, kr = r_ids.shape
    w = kr + c_ids.shape[1]
    bits = max(1, (w - 1).bit_length())
    top = max(int(r_ids.max(initial=0)), int(c_ids.max(initial=0))) + 1
    dtype = np.int32 if ((top + w) << bits) < 2**31 else np.int64
    key = np.empty((n, w), dtype=dtype)
    key[:, :kr] = r_ids
    key[:, kr:] = c_ids
    if absent is not None:
        key = np.where(absent, top + np.arange(w, dtype=dtype), key)
    key <<= bits
    key |= np.arange(w, dtype=dtype)
    key.sort(axis=1)
    same = (key[:, 1:] ^ key[:, :-1]) < (1 << bits)
    key &= (1 << bits) - 1
    return key, same


def _rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise sum of a * b in one pass (np.where and temporaries dominate the cost otherwise)."""
    # accumulate in the working precision (einsum with a wider dtype is ~4x slower), then widen
    return np.einsum("ij,ij->i", a, b).astype(np.float64)


def _topk_kl_chunk(r_ids: np.ndarray, r_lp: np.ndarray, c_ids: np.ndarray, c_lp: np.ndarray,
                   dtype: type = np.float64) -> tuple[np.ndarray, ...]:
    n, kr = r_ids.shape
    w = kr + c_ids.shape[1]
    lp_cat = np.empty((n, w), dtype=dtype)
    lp_cat[:, :kr] = r_lp
    lp_cat[:, kr:] = c_lp
    # absent slots (padding id -1, or a non-finite logprob): probability 0, log 0 (so sums of logs skip
    # them), never paired. Checked with cheap reductions first: real top-k lists rarely have any.
    padded = (min(int(r_ids.min(initial=0)), int(c_ids.min(initial=0))) < 0
              or not np.isfinite(lp_cat.sum()))
    absent = None
    if padded:
        absent = np.concatenate([r_ids < 0, c_ids < 0], axis=1) | ~np.isfinite(lp_cat)
        lp_cat[absent] = 0.0
    p_cat = np.exp(lp_cat)
    if absent is not None:  # exactly when padded
        p_cat[absent] = 0.0
    pr, qc = p_cat[:, :kr], p_cat[:, kr:]
    sum_p = pr.sum(axis=1, dtype=np.float64)
    sum_q = qc.sum(axis=1, dtype=np.float64)
    ref_plp = _rowdot(pr, lp_cat[:, :kr])
    cand_lq = lp_cat[:, kr:].sum(axis=1, dtype=np.float64)
    if absent is not None:  # exactly when padded
        n_r = (~absent[:, :kr]).sum(axis=1)
        n_q = (~absent[:, kr:]).sum(axis=1)
        p_min = np.where(absent[:, :kr], 2.0, pr).min(axis=1).astype(np.float64)
        q_min = np.where(absent[:, kr:], 2.0, qc).min(axis=1).astype(np.float64)
    else:
        n_r = np.full(n, kr)
        n_q = np.full(n, w - kr)
        p_min = pr.min(axis=1).astype(np.float64)
        q_min = qc.min(axis=1).astype(np.float64)
    tp_raw = np.clip(1.0 - sum_p, 0.0, 1.0)
    tq_raw = np.clip(1.0 - sum_q, 0.0, 1.0)
    tp = np.maximum(tp_raw, TAIL_FLOOR)
    tq = np.maximum(tq_raw, TAIL_FLOOR)
    p_min = np.where(p_min <= 1.0, p_min, tp)  # a side with no tokens listed
    q_min = np.where(q_min <= 1.0, q_min, tq)

    col, same = _sorted_union(r_ids, c_ids, absent)
    flat = col + (np.arange(n, dtype=col.dtype) * w)[:, None]
    lp_s = np.take(lp_cat, flat)
    p_s = np.take(p_cat, flat)
    is_ref = col < kr
    # pair (s, s+1): s the reference slot, s+1 the candidate slot with the same id (ids are unique per side)
    pair = same & is_ref[:, :-1]
    pair &= ~is_ref[:, 1:]
    pf = pair.astype(dtype)
    overlap = pair.sum(axis=1)
    lp_l, lp_r = lp_s[:, :-1], lp_s[:, 1:]
    pfp = pf * p_s[:, :-1]
    known_i = _rowdot(pfp, lp_l - lp_r)
    pair_p = pfp.sum(axis=1, dtype=np.float64)
    pair_plp = _rowdot(pfp, lp_l)
    pair_q = _rowdot(pf, p_s[:, 1:])
    pair_lq = _rowdot(pf, lp_r)

    n_a = n_r - overlap
    n_c = n_q - overlap
    a_mass = np.maximum(sum_p - pair_p, 0.0)
    c_mass = np.maximum(sum_q - pair_q, 0.0)
    q_imp = np.minimum(q_min, tq / (n_a + 1))
    p_imp = np.minimum(p_min, tp / (n_c + 1))
    p_tail = np.maximum(tp - n_c * p_imp, TAIL_FLOOR)
    q_tail = np.maximum(tq - n_a * q_imp, TAIL_FLOOR)
    part_a = (ref_plp - pair_plp) - a_mass * np.log(q_imp)
    part_c = p_imp * (n_c * np.log(p_imp) - (cand_lq - pair_lq))
    kl = np.maximum(known_i + part_a + part_c + _xlogx_over(p_tail, q_tail), 0.0)

    lower = _lower_bound(a_mass, c_mass, tp_raw, tq, np.minimum(n_a * q_min, tq), np.minimum(n_c * p_min, tp_raw),
                         known_i)
    lower = np.minimum(lower, kl)  # the point estimate is one feasible refinement, so lower <= kl up to rounding
    return kl, lower, tp_raw, tq_raw, overlap


def topk_kl(ref: TopK, cand: TopK, *, chunk_rows: int = CHUNK_ROWS, dtype: type = np.float64,
            threads: int | None = None) -> TopKKL:
    """KL(ref || cand) per position from aligned top-k lists (same N; k may differ between sides).

    ``dtype`` is the working precision of the [N, 2k] arrays (row sums are always float64);
    float32 halves memory traffic and changes results by ~1e-7 relative (API logprobs are float32).
    """
    if ref.n != cand.n:
        raise ValueError(f"top-k arrays cover different numbers of positions: reference {ref.n}, candidate {cand.n}")
    n = ref.n
    outs = [np.empty(n) for _ in range(4)] + [np.empty(n, dtype=np.int64)]
    bounds = [(s, min(n, s + chunk_rows)) for s in range(0, n, chunk_rows)]

    def work(se: tuple[int, int]) -> None:
        s, e = se
        res = _topk_kl_chunk(ref.ids[s:e], ref.logprobs[s:e], cand.ids[s:e], cand.logprobs[s:e], dtype=dtype)
        for o, r in zip(outs, res):
            o[s:e] = r

    workers = max(1, min(threads or (os.cpu_count() or 1), len(bounds)))
    if workers == 1:
        for se in bounds:
            work(se)
    else:  # numpy releases the GIL in its loops, so chunks run in parallel on threads
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(work, bounds))
    return TopKKL(kl=outs[0], lower=outs[1], ref_tail=outs[2], cand_tail=outs[3], overlap=outs[4])


@dataclass(frozen=True)
class SampledKL:
    """Per-token terms of the sampled-token KL estimators (all float64 [N])."""

    k1: np.ndarray  # log p(x) - log q(x): unbiased, high variance, can be negative
    k3: np.ndarray  # (r - 1) - log r, r = q(x) / p(x): unbiased, never negative, lower variance


def sampled_kl(ref_token_logprob: np.ndarray, cand_token_logprob: np.ndarray) -> SampledKL:
    """Schulman's (2020, "Approximating KL Divergence") estimators of KL(p || q) at tokens x drawn from p.

    Why it matters: an endpoint's top-k logprobs only bound KL from below, but the logprob both sides give a
    token *sampled from the reference* is enough for an unbiased estimate: E_p[k1] = E_p[k3] = KL(p || q) at
    each position, given the context, because E_p[r] = 1. The tokens must be sampled from the reference at
    temperature 1 (the model's own distribution p); a greedy continuation would not do.
    """
    lp = np.asarray(ref_token_logprob, dtype=np.float64)
    lq = np.asarray(cand_token_logprob, dtype=np.float64)
    if lp.shape != lq.shape:
        raise ValueError(f"sampled_kl: {lp.shape} reference vs {lq.shape} candidate token logprobs")
    log_r = lq - lp
    return SampledKL(k1=-log_r, k3=np.expm1(log_r) - log_r)
