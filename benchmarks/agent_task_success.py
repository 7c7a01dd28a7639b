"""How agent task success behaves as a headline, by number of scenarios: the real comparison against the old one.

For each number of scenarios (one trial each unless --trials), simulated runs go through the real
``compare_task_success`` (what the agent scoring reports) and, for contrast, the cluster-robust t interval and test
it replaced (its p-value as scoring computed it: None when the spread is zero). Printed per setting: the share of
runs whose interval is zero-width, covers the truth, lies inside the ±margin (what a TOST reads as "shown the
same"), and whose p-value clears Holm at worst rank among six headline tests (p < 0.05 / 6). Settings: A/A (both
endpoints solve each scenario with the same probability, drawn from 0.6 / 0.8 / 0.95 / 1.0), a true 25-point drop
(reference solves every task, candidate each with 0.75) and a total failure (candidate solves none).

    python -m benchmarks.agent_task_success --runs 2000 --scenarios 4,12,24
"""

from __future__ import annotations

import argparse
import random

from verifier.kinds.agent.scoring import Trial, _cluster_p
from verifier.kinds.agent.task_success import compare_task_success
from verifier.stats.intervals import cluster_robust_diff

HOLM_WORST = 0.05 / 6


def _trial(scenario: str, index: int, success: bool) -> Trial:
    return Trial("e", scenario, index, 0, 10, [], "final_answer", success)


def run(setting: str, scenarios: int, trials: int, runs: int, margin: float, seed: int) -> str:
    rng = random.Random(seed)
    stats = {"new": [0, 0, 0, 0], "old": [0, 0, 0, 0]}  # zero-width, covers, inside margin, significant
    truth = {"aa": 0.0, "drop25": -0.25, "fail_all": -1.0}[setting]
    for _ in range(runs):
        if setting == "aa":
            ref_p = [rng.choice((0.6, 0.8, 0.95, 1.0)) for _ in range(scenarios)]
            cand_p = ref_p
        else:
            ref_p = [1.0] * scenarios
            cand_p = [0.75 if setting == "drop25" else 0.0] * scenarios
        pairs = [(_trial(f"s{s}", t, rng.random() < rp), _trial(f"s{s}", t, rng.random() < cp))
                 for s, (rp, cp) in enumerate(zip(ref_p, cand_p)) for t in range(trials)]
        cmp = compare_task_success(pairs)
        assert cmp is not None
        a = [float(r.success) for r, _ in pairs]
        b = [float(c.success) for _, c in pairs]
        clusters = [r.scenario for r, _ in pairs]
        old = cluster_robust_diff(a, b, clusters)
        old_p = _cluster_p(old, scenarios)  # the p-value scoring reported before (None on zero spread)
        for key, iv, p in (("new", cmp.difference, cmp.p_value), ("old", old, old_p)):
            lo, hi = iv.low, iv.high
            if lo is None or hi is None:
                continue
            s = stats[key]
            s[0] += hi - lo == 0
            s[1] += lo <= truth <= hi
            s[2] += -margin < lo and hi < margin
            s[3] += p is not None and p < HOLM_WORST
    cells = []
    for key in ("new", "old"):
        z, c, inside, sig = (x / runs for x in stats[key])
        cells.append(f"{key}: zero-width {z:5.1%} covers {c:5.1%} inside ±{margin:.0%} {inside:5.1%} "
                     f"p<0.05/6 {sig:5.1%}")
    return f"{setting:8s} scenarios={scenarios:3d} trials={trials}  " + " | ".join(cells)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--scenarios", default="4,12,24")
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--margin", type=float, default=0.10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for n in (int(x) for x in args.scenarios.split(",")):
        for setting in ("aa", "drop25", "fail_all"):
            print(run(setting, n, args.trials, args.runs, args.margin, args.seed), flush=True)


if __name__ == "__main__":
    main()
