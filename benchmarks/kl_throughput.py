"""Throughput of the top-k KL estimator: 1 million positions x top-20 (target: <= 2 s on 2 cores).

Synthetic top-20 lists shaped like real ones (sorted, peaked, half the ids shared between the two
sides, vocabulary 150k). Prints each run and the median, for float64 and float32 working precision.
Run: ``python benchmarks/kl_throughput.py [--positions N] [--runs R] [--threads T]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from verifier.kinds.logprob.estimator import TopK, topk_kl


def make_inputs(n: int, k: int, seed: int = 0) -> tuple[TopK, TopK]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 150_000, size=(n, k))
    probs = rng.dirichlet(np.full(k, 0.3), size=n) * rng.uniform(0.7, 1.0, size=(n, 1))
    lp = np.log(np.sort(probs, axis=1)[:, ::-1])
    cand_ids = ids.copy()
    cand_ids[:, k // 2:] = rng.integers(0, 150_000, size=(n, k - k // 2))
    cand_lp = lp + rng.normal(0, 0.05, size=lp.shape)
    return TopK(ids, lp), TopK(cand_ids, cand_lp)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--positions", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="worker threads (default: CPU count)")
    args = ap.parse_args()
    ref, cand = make_inputs(args.positions, args.k)
    print(f"positions={args.positions} k={args.k} cpus={os.cpu_count()} threads={args.threads or os.cpu_count()} "
          f"load={os.getloadavg()[0]:.1f}")
    for dtype in (np.float64, np.float32):
        times, cpu = [], []
        for _ in range(args.runs):
            t0, c0 = time.perf_counter(), time.process_time()
            res = topk_kl(ref, cand, dtype=dtype, threads=args.threads)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        # CPU seconds are reported too: on a shared machine wall time mostly measures the other tenants
        print(f"{np.dtype(dtype).name}: wall={[round(t, 3) for t in times]} median={statistics.median(times):.3f} s; "
              f"cpu={[round(t, 3) for t in cpu]} median={statistics.median(cpu):.3f} s (mean KL {res.kl.mean():.4f})")


if __name__ == "__main__":
    main()
