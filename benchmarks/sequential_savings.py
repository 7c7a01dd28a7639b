"""What ``--sequential`` saves, and what it costs in errors, against a fixed plan of n = 2,000 cases (issue 40).

Every block simulates many seeded runs (``--sims``, default 1,000 per row), looks every 50 cases, alpha = 0.05, the
verdict's margins (+-5 points), and compares the sequential decision with the fixed-n one on the same data at
n = 2,000:

* **one headline** (per-call schema accuracy; and forced-call success, always material), as
  :class:`verifier.testing.sequential_sim.PairedModel` draws (reference 95 % right, a quarter of the cases hard);
* **the whole family the sequential mode judges** for a tool-call suite: schema accuracy, forced-call success
  (30 % of the cases forced), trigger F1 and argument agreement against the reference's floor
  (:class:`verifier.testing.sequential_sim.FamilyModel`), in four blocks: a sampling reference (15 % of the cases
  ambiguous about calling, 30 % about arguments) or a deterministic one (its second answers equal its first:
  floor 1), answering 10 % of the cases twice or 50 %. Bonferroni over the
  four headlines, as the runner does. An endpoint stops at the first look where its verdict is settled (a headline
  ``differs``, or all four are ``consistent``); its status is ``differs`` if any headline is, ``consistent`` if all
  are.

Settings (shift of the candidate, in points, on schema accuracy, trigger F1 and argument agreement; forced-call
success, where any drop is material, moves only in "clearly different"):

* ``A/A``: error = ``differs``;
* ``clearly different (-10 pts)``: every headline 10 points worse; error = not ``differs`` (a miss);
* ``clearly consistent (-1 pt)``: error = ``differs``;
* ``at the margin (-5 pts)``: error = any of the three headlines at the margin called ``consistent``.

Fixed n: the verdict's convention on all 2,000 cases (95 % intervals: outside the margin ``differs``, inside
``consistent``; exact McNemar for the material forced calls; Holm over the family's ``p_outside``), with normal
intervals (per-case delta method for the floor metrics, the covariance of the shared first answers included)
rather than the verdict's bootstrap, so that thousands of runs take minutes.

Usage (from a checkout: ``PYTHONPATH=.``):
``python benchmarks/sequential_savings.py [--sims 1000] [--look-every 50] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import binom, norm

from verifier.run.sequential import SequentialPolicy, judge_endpoint, look_schedule
from verifier.run.sequential_floor import FloorHeadlineUnits
from verifier.testing.sequential_sim import FamilyModel, PairedModel, TriggerModel, sequential_once

N = 2000
SCHEMA, FORCED, TRIGGER, ARGS = "schema_accuracy", "forced_call_success", "trigger_f1", "argument_agreement"
FAMILY = (SCHEMA, FORCED, TRIGGER, ARGS)
SHORT = {SCHEMA: "schema", FORCED: "forced", TRIGGER: "trig.F1", ARGS: "args"}
ONE = [("A/A", 0.0, "differs", SCHEMA), ("clearly different (-10 pts)", -0.10, "not differs", SCHEMA),
       ("clearly consistent (-1 pt)", -0.01, "differs", SCHEMA),
       ("at the margin (-5 pts)", -0.05, "consistent", SCHEMA), ("A/A, forced calls", 0.0, "differs", FORCED)]
DETERMINISTIC = TriggerModel(pos=0.65, neg=0.35)
BLOCKS = [("a sampling reference answering 10 % of the cases twice", 0.10, TriggerModel(), 0.3),
          ("a sampling reference answering 50 % of the cases twice", 0.50, TriggerModel(), 0.3),
          ("a deterministic reference answering 10 % of the cases twice", 0.10, DETERMINISTIC, 0.0),
          ("a deterministic reference answering 50 % of the cases twice", 0.50, DETERMINISTIC, 0.0)]
SETTINGS = [("A/A", 0.0, "differs"), ("clearly different (-10 pts)", -0.10, "not differs"),
            ("clearly consistent (-1 pt)", -0.01, "differs"), ("at the margin (-5 pts)", -0.05, "consistent")]


# --------------------------------------------------------------------------- fixed n


def _normal(d: float, se: float, margin: float, alpha: float) -> tuple[float, str]:
    """(p_outside, consistent or open) by the verdict's convention: the 95 % interval decides both ways."""
    if se <= 0:
        return 1.0, "open"
    p_out = min(1.0, 2 * min(norm.sf((d - margin) / se), norm.cdf((d + margin) / se)))
    z = norm.ppf(1 - alpha / 2)
    return p_out, "consistent" if d - z * se > -margin and d + z * se < margin else "open"


def fixed_paired(x: np.ndarray, margin: float, alpha: float, material: bool) -> tuple[float, str]:
    """(p_outside, consistent/open) of a paired per-case difference; exact McNemar p when always material."""
    se = float(x.std(ddof=1) / np.sqrt(len(x)))
    if se == 0:  # every unit the same: the verdict's exact bound, 1 - (alpha/2)^(1/n) of units, each moving by 2
        se = 2 * (1 - (alpha / 2) ** (1 / len(x))) / norm.ppf(1 - alpha / 2)
    p, status = _normal(float(x.mean()), se, margin, alpha)
    if material:
        plus, nonzero = int((x > 0).sum()), int((x != 0).sum())
        p_mc = min(1.0, 2 * binom.cdf(min(plus, nonzero - plus), nonzero, 0.5)) if nonzero else 1.0
        p = min(p, p_mc)
    return p, status


def _var(psi: np.ndarray, ratio: float, den: np.ndarray) -> float:
    """The ratio's variance by the delta method, never below that of an Agresti-Coull proportion on the cases that
    count (the verdict's Wilson-based hull does the same: no zero width from zero spread)."""
    m = int((den > 0).sum())
    p = (ratio * m + 2) / (m + 4)
    return max(float(psi.var(ddof=1)) / len(psi), p * (1 - p) / (m + 4))


def fixed_floor(h: FloorHeadlineUnits, margin: float, alpha: float) -> tuple[float, str]:
    """The floor difference by the delta method: each ratio's per-case influence, and their covariance on the
    cases in both samples (both are scored against the reference's same first answers)."""
    c, f = h.candidate, h.floor
    assert f is not None
    rc, rf = c.num.sum() / c.den.sum(), f.num.sum() / f.den.sum()
    psi_c = (c.num - rc * c.den) / c.den.mean()
    psi_f = (f.num - rf * f.den) / f.den.mean()
    var = _var(psi_c, rc, c.den) + _var(psi_f, rf, f.den)
    both, ic, jf = np.intersect1d(c.positions, f.positions, return_indices=True)
    if len(both) > 1:
        var -= 2 * float(np.sum((psi_c[ic] - psi_c.mean()) * (psi_f[jf] - psi_f.mean()))) / (len(psi_c) * len(psi_f))
    return _normal(float(rc - rf), float(np.sqrt(max(var, 0.0))), margin, alpha)


def fixed_family(heads: list, policy: SequentialPolicy) -> dict[str, str]:
    """Each headline's fixed-n status on all the cases, Holm over the family's p_outside."""
    p, status = {}, {}
    for h in heads:
        m = policy.margins[h.metric]
        if isinstance(h, FloorHeadlineUnits):
            p[h.metric], status[h.metric] = fixed_floor(h, m, policy.alpha)
        else:
            p[h.metric], status[h.metric] = fixed_paired(h.units, m, policy.alpha, h.metric in policy.always_material)
    k = len(p)
    for i, metric in enumerate(sorted(p, key=p.__getitem__)):  # Holm's step-down
        if p[metric] >= policy.alpha / (k - i):
            break
        status[metric] = "differs"
    return status


# --------------------------------------------------------------------------- one block


@dataclass
class Tally:
    """One row: errors and statuses of the endpoint, both ways, cases used, and per-headline statuses."""

    sims: int = 0
    seq_err: int = 0
    fix_err: int = 0
    seq: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("differs", "consistent", "open"), 0))
    fix: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("differs", "consistent", "open"), 0))
    used: list[int] = field(default_factory=list)
    heads: dict[str, dict[str, int]] = field(default_factory=dict)

    def row(self, label: str, error: str) -> str:
        s, u = self.sims, np.array(self.used)
        shares = lambda d: "/".join(f"{d[k] / s:.0%}" for k in ("differs", "consistent", "open"))  # noqa: E731
        return (f"| {label} | `{error}` | {self.seq_err}/{s} ({self.seq_err / s:.1%}) | {self.fix_err}/{s} "
                f"({self.fix_err / s:.1%}) | {shares(self.seq)} | {shares(self.fix)} | {u.mean():,.0f} "
                f"({np.median(u):,.0f}, {np.percentile(u, 90):,.0f}) | {1 - u.mean() / N:.0%} |")

    def head_row(self, label: str) -> str:
        s = self.sims
        cells = [f"{d['differs'] / s:.0%}/{d['consistent'] / s:.0%}/{d['open'] / s:.0%}"
                 for m, d in self.heads.items()]
        return f"| {label} | " + " | ".join(cells) + " |"


def endpoint(statuses: list[str]) -> str:
    return "differs" if "differs" in statuses else "consistent" if all(s == "consistent" for s in statuses) \
        else "open"


def is_error(status: str, error: str, margin_heads: dict[str, str] | None = None) -> bool:
    if error == "not differs":
        return status != "differs"
    if error == "consistent" and margin_heads is not None:  # any headline at the margin called consistent
        return any(margin_heads[m] == "consistent" for m in (SCHEMA, TRIGGER, ARGS))
    return status == error


def family_block(shift: float, error: str, block: tuple, sims: int, look_every: int, seed: list[int],
                 policy: SequentialPolicy) -> Tally:
    shifts = {SCHEMA: shift, TRIGGER: shift, ARGS: shift, FORCED: shift if error == "not differs" else 0.0}
    _, share, trigger, args_ambiguous = block
    model = FamilyModel(shifts=shifts, repeat_share=share, trigger=trigger, args_ambiguous=args_ambiguous)
    rng = np.random.default_rng(seed)
    looks = look_schedule(N, look_every, N)
    t = Tally(heads={m: dict.fromkeys(("differs", "consistent", "open"), 0) for m in FAMILY})
    for _ in range(sims):
        heads = model.draw(N, rng)
        at, judged = judge_endpoint(heads, policy, looks)
        seq_heads: dict[str, str] = {j.metric: j.status for j in judged}
        fix_heads = fixed_family(heads, policy)
        s_status, f_status = endpoint(list(seq_heads.values())), endpoint(list(fix_heads.values()))
        t.sims += 1
        t.seq[s_status] += 1
        t.fix[f_status] += 1
        t.seq_err += is_error(s_status, error, seq_heads)
        t.fix_err += is_error(f_status, error, fix_heads)
        t.used.append(at if at is not None else N)
        for m, st in seq_heads.items():
            t.heads[m][st] += 1
    return t


def one_block(shift: float, error: str, metric: str, sims: int, look_every: int, seed: list[int],
              policy: SequentialPolicy) -> Tally:
    rng = np.random.default_rng(seed)
    t = Tally()
    for _ in range(sims):
        x = PairedModel(shift=shift).draw(N, rng)
        status, n = sequential_once(x, policy, metric, look_every)
        p, fixed = fixed_paired(x, policy.margins[metric], policy.alpha, metric == FORCED)
        fixed = "differs" if p < policy.alpha else fixed
        t.sims += 1
        t.seq[status] += 1
        t.fix[fixed] += 1
        t.seq_err += is_error(status, error)
        t.fix_err += is_error(fixed, error)
        t.used.append(n)
    return t


HEADER = ("| setting | error counted | sequential error | fixed-n error | sequential differs/consistent/open | "
          "fixed-n differs/consistent/open | mean cases (median, p90) | saved |\n|---|---|---|---|---|---|---|---|")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--look-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    policy = SequentialPolicy.from_verdict()
    t0 = time.time()
    print(f"{args.sims:,} simulated runs per row, fixed plan n = {N:,}, looks every {args.look_every}, "
          f"alpha = {policy.alpha}, margins +-{policy.margins[SCHEMA]:.2f} (every headline here)\n")
    print("One headline (Bonferroni k = 1)\n")
    print(HEADER)
    for i, (label, shift, error, metric) in enumerate(ONE):
        print(one_block(shift, error, metric, args.sims, args.look_every, [args.seed, i], policy).row(label, error),
              flush=True)
    for b, block in enumerate(BLOCKS):
        print(f"\nThe family: schema accuracy, forced-call success, trigger F1, argument agreement (k = 4); "
              f"{block[0]} (its floor: ~{block[1] * N:,.0f} cases at n = {N:,})\n")
        print(HEADER)
        rows = []
        for i, (label, shift, error) in enumerate(SETTINGS):
            t = family_block(shift, error, block, args.sims, args.look_every, [args.seed, 100 + b, i], policy)
            rows.append(t.head_row(label))
            print(t.row(label, error), flush=True)
        print("\nPer headline, sequential differs/consistent/open:\n")
        print("| setting | " + " | ".join(SHORT[m] for m in FAMILY) + " |\n|---|" + "---|" * len(FAMILY))
        print("\n".join(rows), flush=True)
    print(f"\n({time.time() - t0:,.0f} s)")


if __name__ == "__main__":
    main()
