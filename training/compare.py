"""Compare two checkpoints' evaluations case by case (outputs of ``python -m training.evaluate --out``).

    python -m training.compare training/eval_results.json /tmp/candidate/eval.json

Why: a retrain is kept or dropped on whether it beats the shipped checkpoint, and the two were measured on
the same held-out cases, so the comparison is paired: the case-accuracy difference with a Newcombe
interval and an exact McNemar p, plus how many cases moved from each outcome to each other one (where a
change helped and where it hurt). Agent task success is compared per scenario the same way.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from verifier.stats import intervals as stats


def paired_cases(base: dict[str, str], cand: dict[str, str]) -> tuple[list[bool], list[bool], Counter[tuple[str, str]]]:
    """Correctness of the cases both runs scored, and the outcome transitions base -> candidate."""
    shared = sorted(set(base) & set(cand))
    moves: Counter[tuple[str, str]] = Counter((base[c], cand[c]) for c in shared if base[c] != cand[c])
    return [base[c] == "correct" for c in shared], [cand[c] == "correct" for c in shared], moves


def _pts(share: float | None) -> str:
    """A difference of proportions in percentage points, signed; n/a when it could not be computed."""
    return "n/a" if share is None else f"{100 * share:+.1f}"


def compare_variant(base: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    """Readable lines for one variant present in both evaluations."""
    lines = []
    if "case_outcomes" in base and "case_outcomes" in cand:
        a, b, moves = paired_cases(base["case_outcomes"], cand["case_outcomes"])
        diff = stats.newcombe_paired_diff(a, b)
        lines.append(f"case accuracy {sum(a)}/{len(a)} -> {sum(b)}/{len(b)}: {_pts(diff.value)} pts "
                     f"[{_pts(diff.low)}, {_pts(diff.high)}], McNemar p {stats.mcnemar(a, b):.3g}")
        for (was, now), n in moves.most_common(8):
            lines.append(f"  {n:4d}  {was} -> {now}")
    else:
        lines.append("no per-case outcomes in one of the files (evaluated before they were recorded)")
    runs_a = {r["scenario"]: r["success"] for r in base.get("agent_runs", [])}
    runs_b = {r["scenario"]: r["success"] for r in cand.get("agent_runs", [])}
    shared = sorted(set(runs_a) & set(runs_b))
    if shared:
        a, b = [runs_a[s] for s in shared], [runs_b[s] for s in shared]
        lines.append(f"agent success {sum(a)}/{len(a)} -> {sum(b)}/{len(b)}, McNemar p {stats.mcnemar(a, b):.3g}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", type=Path, help="evaluation of the shipped (or reference) checkpoint")
    ap.add_argument("candidate", type=Path, help="evaluation of the retrained checkpoint")
    args = ap.parse_args(argv)
    base, cand = (json.loads(p.read_text())["variants"] for p in (args.base, args.candidate))
    for name in [v for v in base if v in cand]:
        print(f"{name}:")
        for line in compare_variant(base[name], cand[name]):
            print(f"  {line}")


if __name__ == "__main__":
    main()
