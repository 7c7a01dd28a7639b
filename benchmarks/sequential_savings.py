"""What ``--sequential`` saves, and what it costs in errors, against a fixed plan of n = 2,000 cases (issue 40).

Four settings of one headline (per-call schema accuracy, margin +-5 points, alpha = 0.05), each over many seeded
simulated runs of paired outcomes (:class:`verifier.testing.sequential_sim.PairedModel`: reference 95 % accurate,
a quarter of the cases hard, answers drawn independently so even a twin disagrees on hard cases):

* ``A/A``: identical candidate. Error: ``differs``.
* ``clearly different``: candidate 10 points worse. Error: not ``differs`` (a miss).
* ``clearly consistent``: candidate 1 point worse (well inside the margin). Error: ``differs``.
* ``at the margin``: candidate exactly 5 points worse. Error: ``consistent``.
* ``A/A, forced calls``: identical candidate on an always-material metric (forced-call success, where a shown
  point-null difference is ``differs`` whatever the margin). Error: ``differs``.

Sequential: :func:`verifier.run.sequential.judge_headline`, looks every 50 cases, stop at the first settled look.
Fixed n: the same decisions from a fixed-n 95 % interval at n = 2,000 (normal approximation, judged once).
Usage (from a checkout: ``PYTHONPATH=.``):
``python benchmarks/sequential_savings.py [--sims 1000] [--look-every 50] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import binom, norm

from verifier.run.sequential import SequentialPolicy
from verifier.testing.sequential_sim import PairedModel, sequential_once

N = 2000
SCHEMA, FORCED = "schema_accuracy", "forced_call_success"
SETTINGS = [("A/A", 0.0, "differs", SCHEMA), ("clearly different (-10 pts)", -0.10, "not differs", SCHEMA),
            ("clearly consistent (-1 pt)", -0.01, "differs", SCHEMA),
            ("at the margin (-5 pts)", -0.05, "consistent", SCHEMA), ("A/A, forced calls", 0.0, "differs", FORCED)]


def fixed_n(x: np.ndarray, margin: float, alpha: float, material: bool) -> str:
    """The fixed-n decision at n = len(x): 95 % interval outside the margin (or, for an always-material metric,
    exact McNemar p < alpha): differs; TOST inside: consistent."""
    if material:
        plus, nonzero = int((x > 0).sum()), int((x != 0).sum())
        if nonzero and 2 * binom.cdf(min(plus, nonzero - plus), nonzero, 0.5) < alpha:
            return "differs"
    d, se = x.mean(), x.std(ddof=1) / np.sqrt(len(x))
    lo, hi = d - norm.ppf(1 - alpha / 2) * se, d + norm.ppf(1 - alpha / 2) * se
    if lo > margin or hi < -margin:
        return "differs"
    z = norm.ppf(1 - alpha)
    return "consistent" if d - z * se > -margin and d + z * se < margin else "open"


def is_error(status: str, error: str) -> bool:
    return status != "differs" if error == "not differs" else status == error


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--look-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    policy = SequentialPolicy.from_verdict()
    print(f"{args.sims} simulated runs per setting, fixed plan n = {N}, looks every {args.look_every}, "
          f"alpha = {policy.alpha}, margins +-{policy.margins[SCHEMA]:.2f} (schema), +-{policy.margins[FORCED]:.2f} "
          "(forced calls), one headline per run")
    print(f"{'setting':<28} {'error':<12} {'seq. error':>13} {'fixed-n error':>14} {'diff/cons/open':>15} "
          f"{'mean cases':>10} {'median':>6} {'p90':>5} {'saved':>6}")
    t0 = time.time()
    for i, (label, shift, error, metric) in enumerate(SETTINGS):
        rng = np.random.default_rng([args.seed, i])
        seq_err = fix_err = 0
        used, statuses = [], []
        for _ in range(args.sims):
            x = PairedModel(shift=shift).draw(N, rng)
            status, n = sequential_once(x, policy, metric, args.look_every)
            seq_err += is_error(status, error)
            statuses.append(status)
            used.append(n)
            fix_err += is_error(fixed_n(x, policy.margins[metric], policy.alpha, metric == FORCED), error)
        s = args.sims
        shares = "/".join(f"{statuses.count(k) / s:.0%}" for k in ("differs", "consistent", "open"))
        print(f"{label:<28} {error:<12} {seq_err:>6}/{s} {seq_err / s:5.1%} {fix_err:>6}/{s} {fix_err / s:5.1%} "
              f"{shares:>15} {np.mean(used):>10.0f} {np.median(used):>6.0f} {np.percentile(used, 90):>5.0f} "
              f"{1 - np.mean(used) / N:>6.0%}")
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
