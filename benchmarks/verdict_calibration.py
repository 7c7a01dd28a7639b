"""Error rates of the verdict per headline and size, through the real scoring and the real rule (issue 38).

For each headline metric and n in {100, 400, 2000} it simulates (``verifier.testing.verdict_sim``: replies written
as the runner writes ExchangeRecords, scored by ``score_toolcall`` / the agent ``score_records`` /
``score_logprob``, judged by ``verdict_for`` under the default policy):

* A/A: the candidate answers like the reference; how often the metric (and the verdict) says ``differs``;
* at the margin: the true difference equals the margin; how often the metric says ``consistent``;
* at 2x the margin: how often the metric says ``differs`` (power);
* and, last column, how often the A/A twin is shown ``consistent`` (the equivalence test's power).

Goal: both error rates at most alpha (0.05), power at least 80 % at n = 2,000. The worlds (stated so a reader can
check them; "delta" is 0, the margin or twice the margin, toward "worse"):

* ``schema_accuracy``: every case calls one tool; the reference's arguments are malformed on 10 % of calls, the
  candidate's on 10 % + delta. n = cases = calls.
* ``forced_call_success``: every case forces a call; the reference fails 5 %, the candidate 5 % + delta. n = forced
  cases. Material by default (any significant drop differs), so "power" at 2x the margin is the point-null test's
  and "false consistent at the margin" is the equivalence test's.
* ``trigger_f1``: a sampling server (``sampling_behaviour``: 60 % of cases call with probability 0.97, the rest
  0.03, and a fifth of all cases a coin flip), arguments always valid. The candidate's per-case probabilities are
  pulled toward the mean (``f1_lowered``) so its expected F1 against the reference is delta below a twin's with the
  trigger rate unchanged. Judged against the floor from the reference's repeated cases (default share 50 %, at
  least 50 cases; ``:share`` after the metric name changes it, e.g. ``trigger_f1:0.1``). n = cases.
* ``argument_agreement``: every case calls; arguments always valid; a fifth of the cases are unsure (each answer
  names one of two cities with probability 1/2), the rest always the same city: a twin agrees on ~90 % of calls.
  The candidate answers like the reference but names a third city on a share e of calls, e = delta / (the twin's
  expected agreement), so its expected agreement is delta below a twin's. Floor as for trigger F1. n = cases = calls.
* ``task_success`` (agent): n/2 scenarios x 2 trials, per-scenario success uniform in [0.25, 0.95], the candidate's
  moved down by delta on average (``shifted``). n = trials.
* ``kl_mean``: exact per-token KL (full distributions, as the built-in engine stores them) along one sampled
  continuation of 64 tokens per case, log-normal per sequence (log-sd 0.5) and per token (log-sd 1.0) around a true
  mean KL of margin / 10 (A/A: a twin differs by numerical noise only), the margin, or twice it (``kl_sequences``).
  n = 100 / 400 / 2,000 maps to n/10 = 10 / 40 / 200 prompts of one sequence each (the KL's unit is the prompt,
  and a token count of 2,000 would say nothing of its error rates); below 10 prompts
  (``cluster_ci.MIN_CLUSTERS``) the interval is withheld, so the metric can then never be consistent or differ.
* ``kl_mean_heavy``: the same headline (``kl_mean``) in a more skewed world: a sequence's level has log-sd 0.83,
  the spread of a prompt's level in ``benchmarks/kl_coverage.py``'s harsh world (log-sd 0.75 between prompts and
  0.35 between one prompt's sequences: sqrt(0.75^2 + 0.35^2)); tokens log-sd 1.0, 64 per sequence. Here the KL
  interval with equal tails missed low (top under the true KL) 6.2 % of the time at 10 prompts.

Runs in rounds of ``--chunk`` simulations per cell, so a run cut short still fills every cell evenly; each finished
piece is appended to ``--save`` (JSON lines) and skipped on the next start, ``--deadline`` stops starting new ones.
Seeds are stable across processes (crc32 of the cell and piece), so the same command gives the same table.

Usage: ``python benchmarks/verdict_calibration.py [--sims 1000] [--sizes 100 400 2000] [--workers 2]
[--save results.jsonl] [--deadline 06:30] [--table-only]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from verifier.kinds.toolcall import reference_repeats  # noqa: E402
from verifier.kinds.toolcall.suite_format import ToolcallCase  # noqa: E402
from verifier.run.verdict import VerdictPolicy  # noqa: E402
from verifier.testing.verdict_sim import (  # noqa: E402
    Endpoint,
    f1_lowered,
    judge,
    kl_sequences,
    sampling_behaviour,
    score_agent_pair,
    score_kl_pair,
    score_toolcall_pair,
    shifted,
    toolcall_cases,
    twin_agreement,
)

POLICY = VerdictPolicy()
CONDITIONS = ("aa", "margin", "twice")
METRICS = ("schema_accuracy", "forced_call_success", "trigger_f1", "argument_agreement", "task_success", "kl_mean",
           "kl_mean_heavy")
KL_TOKENS = 64
KL_SEQ_SD = {"kl_mean": 0.5, "kl_mean_heavy": 0.83}  # log-sd of a sequence's KL level per KL world (docstring)
Row = tuple[str | None, str]  # (the metric's status, the verdict's status)


@cache
def _cases(n: int, forced_every: int) -> list[ToolcallCase]:
    return toolcall_cases(n, "s", forced_every=forced_every)


def _spec(metric: str) -> tuple[str, float]:
    """``name`` or ``name:share`` (the reference repeat share for the floor-based headlines)."""
    name, _, share = metric.partition(":")
    return name, float(share) if share else reference_repeats.DEFAULT_SHARE


def _one(metric: str, n: int, condition: str, seed: int) -> Row:
    """(the metric's status, the verdict's status) of one simulated run (the worlds: module docstring)."""
    name, share = _spec(metric)
    headline = "kl_mean" if name in KL_SEQ_SD else name  # the KL worlds judge one headline
    rng = np.random.default_rng(seed)
    margin = POLICY.margins[headline]
    delta = {"aa": 0.0, "margin": margin, "twice": 2 * margin}[condition]
    always = np.ones(n)
    if name in ("schema_accuracy", "forced_call_success"):
        base = 0.10 if name == "schema_accuracy" else 0.05
        cases = _cases(n, 1 if name == "forced_call_success" else 0)
        pair = score_toolcall_pair("s", cases, Endpoint(always, base), Endpoint(always, base + delta), rng, share)
    elif name == "trigger_f1":
        p = sampling_behaviour(n, rng)
        pair = score_toolcall_pair("s", _cases(n, 0), Endpoint(p, 0.0), Endpoint(f1_lowered(p, delta), 0.0), rng,
                                   share)
    elif name == "argument_agreement":
        alt = np.where(rng.random(n) < 0.2, 0.5, 0.0)
        other = delta / twin_agreement(alt)
        pair = score_toolcall_pair("s", _cases(n, 0), Endpoint(always, 0.0, alt),
                                   Endpoint(always, 0.0, alt, other), rng, share)
    elif name == "task_success":
        p = rng.uniform(0.25, 0.95, n // 2)
        pair = score_agent_pair(p, shifted(p, -delta), 2, rng)
    elif name in KL_SEQ_SD:
        pair = score_kl_pair(kl_sequences(n // 10, KL_TOKENS, delta or margin / 10, rng, seq_sd=KL_SEQ_SD[name]))
    else:
        raise ValueError(f"unknown metric {metric!r}")
    v = judge([pair], POLICY)
    e = next((e for e in v.evidence if e.metric == headline), None)
    return (None if e is None else e.status), v.status


def _piece(job: tuple[str, int, str, int, int]) -> tuple[tuple[str, int, str, int, int], list[Row], float]:
    metric, n, condition, k, sims = job
    t0 = time.process_time()
    seed = zlib.crc32(f"{metric}|{n}|{condition}|{k}".encode())
    rows = [_one(metric, n, condition, seed * 1000 + i) for i in range(sims)]
    return job, rows, time.process_time() - t0


def _load(paths: list[Path]) -> dict[tuple[str, int, str, int, int], list[Row]]:
    """Finished pieces from every file (a piece is keyed by its cell, index and size, so the same piece run by two
    invocations is the same simulations, read once)."""
    done: dict[tuple[str, int, str, int, int], list[Row]] = {}
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            d = json.loads(line)
            done[(d["metric"], d["n"], d["condition"], d["piece"], d["sims"])] = [tuple(r) for r in d["rows"]]
    return done


def _share(rows: list[Row], status: str, verdict: bool = False) -> str:
    if not rows:
        return "not run"
    k = sum(1 for m, v in rows if (v if verdict else m) == status)
    return f"{100 * k / len(rows):.1f} % ({k}/{len(rows)})"


def table(done: dict[tuple[str, int, str, int, int], list[Row]], metrics: list[str], sizes: list[int]) -> str:
    cells: dict[tuple[str, int, str], list[Row]] = {}
    for (metric, n, c, _, _), rows in sorted(done.items()):
        cells.setdefault((metric, n, c), []).extend(rows)
    lines = [f"alpha = {POLICY.alpha}; margins {POLICY.margins}; denominators per cell in brackets\n",
             "| metric | n | A/A false differs: metric / verdict | false consistent at the margin | "
             "power at 2x margin (differs) | A/A shown consistent (metric) |", "|---|---|---|---|---|---|"]
    for metric in metrics:
        for n in sizes:
            aa, at, tw = (cells.get((metric, n, c), []) for c in CONDITIONS)
            label = f"{n} ({n // 10} prompts)" if _spec(metric)[0] in KL_SEQ_SD else str(n)
            lines.append(f"| {metric} | {label} | {_share(aa, 'differs')} / {_share(aa, 'differs', True)} | "
                         f"{_share(at, 'consistent')} | {_share(tw, 'differs')} | {_share(aa, 'consistent')} |")
    return "\n".join(lines)


def _deadline(text: str | None) -> float | None:
    """``HH:MM`` UTC today as a Unix time."""
    if not text:
        return None
    hh, mm = (int(x) for x in text.split(":"))
    now = datetime.now(UTC)
    return now.replace(hour=hh, minute=mm, second=0, microsecond=0).timestamp()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sims", type=int, default=1000, help="simulations per cell")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 400, 2000])
    ap.add_argument("--metrics", nargs="+", default=list(METRICS),
                    help="headlines; trigger_f1:0.5 / argument_agreement:0.5 set the reference repeat share")
    ap.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=50, help="simulations per piece (one round = one piece per cell)")
    ap.add_argument("--save", type=Path, nargs="+", default=[],
                    help="JSON lines of finished pieces: appended to the first file; pieces in any of them are skipped "
                         "(and counted in the table)")
    ap.add_argument("--deadline", help="HH:MM UTC: start no new piece after it (the table covers what finished)")
    ap.add_argument("--table-only", action="store_true", help="print the table from --save, simulate nothing")
    ap.add_argument("--from-piece", type=int, default=0,
                    help="run only pieces with this index or later (a second invocation beside a running one)")
    ap.add_argument("--extra", nargs="*", default=[], metavar="METRIC:SHARE@N",
                    help="extra rows at one size, e.g. trigger_f1:0.5@2000 (a larger reference repeat share)")
    ap.add_argument("--extra-sims", type=int, default=200, help="simulations per cell of the --extra rows")
    a = ap.parse_args()
    extras = [(spec, int(n)) for spec, _, n in (e.partition("@") for e in a.extra)]
    for m in [*a.metrics, *(spec for spec, _ in extras)]:
        if _spec(m)[0] not in METRICS:
            ap.error(f"--metrics/--extra: unknown headline {m!r} (known: {', '.join(METRICS)})")
    done = _load(a.save)
    stop = _deadline(a.deadline)
    rounds = -(-max(a.sims, a.extra_sims if extras else 0) // a.chunk)
    jobs = [(m, n, c, k, min(a.chunk, sims - k * a.chunk)) for k in range(rounds)
            for m, n, sims in [(m, n, a.sims) for n in a.sizes for m in a.metrics]
            + [(m, n, a.extra_sims) for m, n in extras]
            for c in a.conditions if sims - k * a.chunk > 0]
    todo = [j for j in jobs if j not in done and j[3] >= a.from_piece]
    t0, cpu = time.time(), 0.0
    if todo and not a.table_only:
        with ProcessPoolExecutor(a.workers) as pool:
            running: set[Future] = set()
            queue = list(todo)
            while queue or running:
                while queue and len(running) < 2 * a.workers and (stop is None or time.time() < stop):
                    running.add(pool.submit(_piece, queue.pop(0)))
                if not running:
                    break
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for f in finished:
                    job, rows, used = f.result()
                    cpu += used
                    done[job] = rows
                    if a.save:
                        with a.save[0].open("a") as fh:
                            fh.write(json.dumps({"metric": job[0], "n": job[1], "condition": job[2], "piece": job[3],
                                                 "sims": job[4], "rows": rows, "cpu_s": round(used, 1)}) + "\n")
                            fh.flush()
                            os.fsync(fh.fileno())
            left = len(queue)
        print(f"{len(todo) - left} pieces run in {time.time() - t0:.0f} s wall, {cpu:.0f} s CPU in workers; "
              f"{left} not started (deadline)" if left else
              f"{len(todo)} pieces run in {time.time() - t0:.0f} s wall, {cpu:.0f} s CPU in workers")
    mine = {k: v for k, v in done.items() if k in set(jobs)}
    print(table(mine, a.metrics, a.sizes))
    for m, n in extras:
        print(next(line for line in table(mine, [m], [n]).splitlines() if line.startswith(f"| {m} |")))


if __name__ == "__main__":
    main()
