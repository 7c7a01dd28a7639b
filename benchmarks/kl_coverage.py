"""Coverage of the KL interval when each prompt contributes several correlated sequences (issue 38).

A run samples ``kl_samples`` (3) continuations per prompt; they share the prompt, so their KL levels are correlated
and the population the verdict generalises over is prompts. This measures how often the 95 % interval covers the
true per-token mean, per clustering method and number of prompts, in the worlds of ``verifier.testing.kl_world``:

* ``lognormal``: prompt level x continuation level x token noise, each lognormal (``--world`` sets the three
  log-sds; between-prompt AND between-continuation spread);
* ``run`` (with ``--from-run DIR``): prompts and their sampled sequences resampled from a real run's exact decode
  KL (``records.jsonl``, one candidate ``--endpoint``), whose own prompts are the population.

Methods, each the cluster bootstrap-t of ``verifier.kinds.logprob.cluster_ci`` on log(mean):

* ``per-sequence``: every sequence its own cluster (the clustering before issue 38's fix; the break-on-purpose);
* ``per-prompt, equal tails``: all sequences of a prompt one cluster, both ends one-sided 97.5 % (the interval
  before the upper-end fix: ``upper_tail=None``);
* ``per-prompt``: the same with the upper end one-sided 99.5 % (``cluster_ci.UPPER_TAIL``; what ships for KL).

Each cell: coverage ± its binomial standard error, then the share of runs whose interval lies wholly above the
truth / wholly below it (below: the interval's top under the true KL, the side a false ``consistent`` comes from;
goal at most 2.5 %, the one-sided share a 95 % interval promises). The smallest number of prompts whose shipped
coverage is at least 93 % in every world is the minimum the interval and the verdict ask for
(``cluster_ci.MIN_CLUSTERS``).

Usage: ``nice -n 19 python benchmarks/kl_coverage.py [--sims 4000] [--prompts 10 12 20 40]
[--world 0.75 0.35 1.0] [--from-run DIR --endpoint int4-decode]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from verifier.kinds.logprob.cluster_ci import MIN_CLUSTERS, UPPER_TAIL, cluster_mean_interval  # noqa: E402
from verifier.testing.kl_world import Draw, EmpiricalWorld, World, draw, draw_empirical  # noqa: E402

METHODS = ("per-sequence", "per-prompt, equal tails", "per-prompt")


def misses(make: Callable[[np.random.Generator], Draw], truth: float, sims: int, seed: int,
           n_boot: int, methods: tuple[str, ...] = METHODS) -> dict[str, tuple[int, int]]:
    """Per method, in how many of ``sims`` seeded runs the interval lies wholly above the truth, and wholly below."""
    rng = np.random.default_rng(seed)
    above = dict.fromkeys(methods, 0)
    below = dict.fromkeys(methods, 0)
    for i in range(sims):
        d = make(rng)
        for method in methods:
            labels = d.sequence if method == "per-sequence" else d.prompt
            tail = None if method == "per-prompt, equal tails" else UPPER_TAIL
            iv = cluster_mean_interval(d.values, labels, n_boot=n_boot, seed=i, min_clusters=2, log_scale=True,
                                       upper_tail=tail)
            assert iv.low is not None and iv.high is not None
            above[method] += iv.low > truth
            below[method] += iv.high < truth
    return {m: (above[m], below[m]) for m in methods}


def run_sequences(run_dir: Path, endpoint: str, suite: str) -> tuple[tuple[np.ndarray, ...], ...]:
    """Per case, the exact decode-path KL of each sampled continuation the candidate was measured on."""
    by: dict[str, list[np.ndarray]] = defaultdict(list)
    with (run_dir / "records.jsonl").open() as fh:
        for line in fh:
            r = json.loads(line)
            x = r.get("extra") or {}
            if (r.get("suite") == suite and r.get("endpoint") == endpoint and "kl" in x
                    and (r.get("variant") or "").startswith("decode_exact_sample")):
                by[r["case_id"]].append(np.asarray(x["kl"], dtype=np.float64))
    if not by:
        raise SystemExit(f"{run_dir}/records.jsonl: no decode_exact_sample KL for endpoint {endpoint!r} in {suite}")
    return tuple(tuple(v) for _, v in sorted(by.items()))


def table(name: str, cells: list[tuple[int, Callable[[np.random.Generator], Draw], float]], sims: int,
          n_boot: int, methods: tuple[str, ...] = METHODS) -> None:
    print(f"{name}\n{'prompts':>7} | " + " | ".join(f"{m:>31}" for m in methods))
    for g, make, truth in cells:
        t0 = time.perf_counter()
        hits = misses(make, truth, sims, seed=1000 + g, n_boot=n_boot, methods=methods)
        out = []
        for m in methods:
            up, down = hits[m]
            c = 1 - (up + down) / sims
            out.append(f"{c * 100:5.1f} % ± {np.sqrt(c * (1 - c) / sims) * 100:3.1f} "
                       f"({up / sims * 100:3.1f} / {down / sims * 100:4.1f})")
        print(f"{g:>7} | " + " | ".join(f"{c:>31}" for c in out) + f"   [{time.perf_counter() - t0:.0f} s]",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=4000, help="seeded runs per cell")
    ap.add_argument("--prompts", type=int, nargs="+", default=[10, 12, 20, 40])
    ap.add_argument("--per-prompt", type=int, default=3, help="sequences per prompt (kl_samples)")
    ap.add_argument("--world", type=float, nargs=3, default=None, metavar=("PROMPT_SD", "SEQ_SD", "TOK_SD"),
                    help="one lognormal world (log-sd between prompts, a prompt's sequences, tokens); default: "
                         "0.5 0.5 1.0 and 0.75 0.35 1.0")
    ap.add_argument("--from-run", type=Path, default=None, help="also resample this run folder's exact decode KL")
    ap.add_argument("--endpoint", default="int4-decode", help="the candidate whose KL --from-run resamples")
    ap.add_argument("--suite", default="logprob-smoke")
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS),
                    help="which intervals (per-sequence clusters cost ~3x the others' CPU)")
    ap.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples (scoring uses 2,000)")
    args = ap.parse_args()
    print(f"{args.sims} simulations per cell, {args.n_boot} bootstrap resamples, {args.per_prompt} sequences per "
          f"prompt; nominal 95 %, bar 93 %; shipped minimum {MIN_CLUSTERS} prompts. Cells: coverage ± its standard "
          f"error (interval wholly above the truth / wholly below it, % of runs; below: goal <= 2.5 %)")
    for sd in [args.world] if args.world else [[0.5, 0.5, 1.0], [0.75, 0.35, 1.0]]:
        worlds = [World(prompts=g, sequences_per_prompt=args.per_prompt, prompt_sd=sd[0], sequence_sd=sd[1],
                        token_sd=sd[2]) for g in args.prompts]
        table(f"lognormal world: log-sd between prompts {sd[0]}, between a prompt's sequences {sd[1]}, between "
              f"tokens {sd[2]}; sequences of 5-40 tokens",
              [(w.prompts, partial(draw, w), w.truth) for w in worlds], args.sims, args.n_boot, tuple(args.methods))
    if args.from_run is not None:
        seqs = run_sequences(args.from_run, args.endpoint, args.suite)
        worlds_e = [EmpiricalWorld(sequences=seqs, prompts=g, sequences_per_prompt=args.per_prompt)
                    for g in args.prompts]
        table(f"run world: {args.endpoint} on {args.suite} in {args.from_run} ({len(seqs)} prompts, "
              f"{sum(len(p) for p in seqs)} sequences, {sum(s.size for p in seqs for s in p)} tokens; true mean "
              f"{worlds_e[0].truth:.4g})",
              [(w.prompts, partial(draw_empirical, w), w.truth) for w in worlds_e], args.sims,
              args.n_boot, tuple(args.methods))


if __name__ == "__main__":
    main()
