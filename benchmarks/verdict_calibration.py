"""Error rates of the verdict per headline and size, through the real scoring and the real rule (issue 38).

For each headline metric and n in {100, 400, 2000} it simulates (``verifier.testing.verdict_sim``):

* A/A: the candidate answers like the reference; how often the metric (and the verdict) says ``differs``;
* at the margin: the true difference equals the margin; how often the metric says ``consistent``;
* at 2x the margin: how often the metric says ``differs`` (power).

Goal: both error rates at most alpha (0.05), power at least 80 % at n = 2,000. Worlds (stated so a reader can check
them): schema accuracy, every case calls one tool, reference arguments invalid 10 % per call, n = cases (= calls);
forced-call success, every case forced, reference failing 5 %, n = forced cases (material by default: a significant
difference of any size differs, so "power" at 2x the margin is the point-null test's); agent task success, n trials
over n/2 scenarios x 2 trials, per-scenario success uniform in [0.25, 0.95]. Trigger F1 and argument agreement need
the reference's twin floor written by the tool-call scoring (issue 38's scoring half), so they are listed only when the
scoring writes ``comparisons["trigger_f1"]`` / ``["argument_agreement"]``; KL is calibrated in
tests/run/test_verdict_calibration.py (a top-k lower bound is never ``consistent``).

Usage: ``python benchmarks/verdict_calibration.py [--sims 1000] [--sizes 100 400 2000] [--workers 2]``
(1,000 simulations per cell take hours at n = 2,000 on two cores: scoring validates every call's JSON).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from verifier.run.verdict import VerdictPolicy  # noqa: E402
from verifier.testing.verdict_sim import (  # noqa: E402
    Endpoint,
    judge,
    score_agent_pair,
    score_toolcall_pair,
    shifted,
    toolcall_cases,
)

POLICY = VerdictPolicy()
CONDITIONS = ("aa", "margin", "twice")


def _one(metric: str, n: int, condition: str, seed: int) -> tuple[str | None, str]:
    """(the metric's status, the verdict's status) of one simulated run."""
    rng = np.random.default_rng(seed)
    margin = POLICY.margins[metric]
    delta = {"aa": 0.0, "margin": margin, "twice": 2 * margin}[condition]
    if metric in ("schema_accuracy", "forced_call_success"):
        cases = toolcall_cases(n, "s", forced_every=1 if metric == "forced_call_success" else 0)
        base = 0.10 if metric == "schema_accuracy" else 0.05
        always = np.ones(n)
        pair = score_toolcall_pair("s", cases, Endpoint(always, base), Endpoint(always, base + delta), rng)
    else:  # task_success
        p = rng.uniform(0.25, 0.95, n // 2)
        pair = score_agent_pair(p, shifted(p, -delta), 2, rng)
    v = judge([pair], POLICY)
    e = next((e for e in v.evidence if e.metric == metric), None)
    return (None if e is None else e.status), v.status


def _cell(args: tuple[str, int, str, int, int]) -> tuple[str, int, str, list[tuple[str | None, str]]]:
    metric, n, condition, sims, seed = args
    return metric, n, condition, [_one(metric, n, condition, seed * 1_000_003 + i) for i in range(sims)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 400, 2000])
    ap.add_argument("--metrics", nargs="+", default=["schema_accuracy", "forced_call_success", "task_success"])
    ap.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=4, help="pieces per cell, so workers share big cells")
    a = ap.parse_args()
    jobs = []
    for metric in a.metrics:
        for n in a.sizes:
            for c in a.conditions:
                per = -(-a.sims // a.chunks)
                jobs += [(metric, n, c, min(per, a.sims - k * per), hash((metric, n, c, k)) % 2**31)
                         for k in range(a.chunks) if a.sims - k * per > 0]
    t0 = time.time()
    out: dict[tuple[str, int, str], list[tuple[str | None, str]]] = {}
    with ProcessPoolExecutor(a.workers) as pool:
        for metric, n, c, res in pool.map(_cell, jobs):
            out.setdefault((metric, n, c), []).extend(res)
    print(f"alpha = {POLICY.alpha}; {a.sims} simulations per cell; {time.time() - t0:.0f} s\n")
    print("| metric | n | A/A false differs (metric / verdict) | false consistent at the margin | "
          "power at 2x margin (differs) |")
    print("|---|---|---|---|---|")
    for metric in a.metrics:
        for n in a.sizes:
            aa, at, tw = (out.get((metric, n, c), []) for c in CONDITIONS)

            def share(rows: list[tuple[str | None, str]], status: str, verdict: bool = False) -> str:
                if not rows:
                    return "not run"
                k = sum(1 for m, v in rows if (v if verdict else m) == status)
                return f"{100 * k / len(rows):.1f} % ({k}/{len(rows)})"
            print(f"| {metric} | {n} | {share(aa, 'differs')} / {share(aa, 'differs', True)} | "
                  f"{share(at, 'consistent')} | {share(tw, 'differs')} |")


if __name__ == "__main__":
    main()
