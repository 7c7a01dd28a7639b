"""Fingerprint false alarms on real A/A runs of the built-in engine: BF16 twins of the BF16 reference.

Each run serves the shipped model at BF16 as the reference and ``--twins`` more times at BF16 as candidates, each
twin with another request concurrency (so other batch shapes and orders reach the engine: its numerics depend on
them), runs the logprob suite through the ordinary runner and reads every twin's ``extra["fingerprint"]``: the
named profile, the gap, the A/A-calibrated ``p_value`` and the simulated ``false_alarm_rate``. A false alarm is a
twin whose p-value is at most alpha (the rule the verdict applies); the old rule (gap >= 0.1 decades) is
counted beside it. Run: ``python benchmarks/fingerprint_aa.py [--runs 3] [--twins 4] [--suite logprob-smoke]``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from verifier.http.endpoints import from_flags
from verifier.run.runner import RunSettings, execute_run
from verifier.run.summary import RunSummary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--twins", type=int, default=4)
    ap.add_argument("--suite", default="logprob-smoke")
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args()
    named = old_rule = total = 0
    for run in range(args.runs):
        eps = from_flags("bf16=builtin:tiny", [f"aa{i}=builtin:tiny" for i in range(args.twins)])
        for i, cfg in enumerate(eps.endpoints[1:]):
            cfg.concurrency = 1 + i * 3  # another batch composition per twin
        out = Path(tempfile.mkdtemp(prefix=f"fp-aa{run}-"))
        outcome = execute_run(RunSettings(suites=[args.suite], endpoints=eps, out=out, display_progress=False))
        summary = RunSummary.read(outcome.run_dir)
        for r in summary.results:
            if r.is_reference or r.kind != "logprob":
                continue
            fp = r.extra.get("fingerprint") or {}
            p, g = fp.get("p_value"), fp.get("gap")
            total += 1
            named += p is not None and p <= args.alpha
            old_rule += g is not None and g >= 0.1
            print(f"run {run} {r.endpoint}: closest {fp.get('verdict')}, gap {g}, p {p}, "
                  f"simulated false-alarm rate {fp.get('false_alarm_rate')} (n {fp.get('false_alarm_n')})")
    print(f"A/A twins named another variant (p <= {args.alpha}): {named} of {total}; "
          f"by the old fixed 0.1-decade margin: {old_rule} of {total}")


if __name__ == "__main__":
    main()
