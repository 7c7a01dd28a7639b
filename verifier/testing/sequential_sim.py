"""Simulated paired outcomes for the ``--sequential`` calibration tests and ``benchmarks/sequential_savings.py``.

Why a model with per-case difficulty: real suites have easy cases (both endpoints always right) and hard ones
(either may fail), so discordant pairs are rarer than two independent coins would give. Each case has a success
probability ``pi`` (1 for the easy share, ``hard_p`` for the rest, so the mean is ``base``); the reference answers
with ``pi``, the candidate with ``pi + shift`` on the hard cases (scaled so the mean moves by ``shift``), each
answer an independent draw: an A/A twin (``shift = 0``) still disagrees on hard cases, as a sampling server does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verifier.run.sequential import HeadlineUnits, SequentialPolicy, judge_headline, look_schedule


@dataclass(frozen=True)
class PairedModel:
    base: float = 0.95  # mean success rate of the reference (e.g. per-call schema accuracy)
    hard_share: float = 0.25  # share of cases where either endpoint may fail
    shift: float = 0.0  # candidate minus reference, in points of the mean

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` per-case differences (candidate - reference) in {-1, 0, 1}."""
        hard = rng.random(n) < self.hard_share
        p_hard = 1 - (1 - self.base) / self.hard_share
        pi_ref = np.where(hard, p_hard, 1.0)
        pi_cand = np.clip(np.where(hard, p_hard + self.shift / self.hard_share, 1.0), 0.0, 1.0)
        return (rng.random(n) < pi_cand).astype(int) - (rng.random(n) < pi_ref).astype(int)


def sequential_once(x: np.ndarray, policy: SequentialPolicy, metric: str, look_every: int,
                    k: int = 1) -> tuple[str, int]:
    """(status, cases used) of one simulated endpoint with one headline judged every ``look_every`` cases."""
    looks = look_schedule(len(x), look_every, len(x))
    h = HeadlineUnits(metric=metric, units=x.astype(float), positions=np.arange(1, len(x) + 1))
    j = judge_headline(h, policy, k, looks, interval=False)
    return j.status, j.settled_at if j.settled_at is not None else len(x)


# --------------------------------------------------------------------------- the whole family of headlines


@dataclass(frozen=True)
class TriggerModel:
    """Per-case trigger propensity of the reference: ``clear`` cases always (``pos``) or never call, the rest call
    with probability 1/2 (a sampling server), each answer drawn independently, so its second answers disagree with
    its first on ambiguous cases (a floor below 1). A candidate ``shift`` points worse misses a call it should make
    with probability ``miss`` (solved so that F1(candidate) - F1(floor) = shift in the population)."""

    pos: float = 0.55
    neg: float = 0.30  # the rest (0.15) ambiguous

    def propensities(self, n: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(n)
        return np.where(u < self.pos, 1.0, np.where(u < self.pos + self.neg, 0.0, 0.5))

    def f1(self, q_scale: float) -> float:
        """Population F1 of answers drawn at ``q = p * q_scale`` against truths drawn at ``p``."""
        amb = 1 - self.pos - self.neg
        tp = self.pos * q_scale + amb * 0.25 * q_scale
        fp = amb * 0.5 * q_scale * 0.5
        fn = self.pos * (1 - q_scale) + amb * 0.5 * (1 - 0.5 * q_scale)
        return 2 * tp / (2 * tp + fp + fn)

    def miss_for(self, shift: float) -> float:
        """The miss rate that moves F1 by ``shift`` (<= 0) below the floor F1 (bisection)."""
        target, lo, hi = self.f1(1.0) + shift, 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.f1(1 - mid) > target else (lo, mid)
        return (lo + hi) / 2


@dataclass(frozen=True)
class FamilyModel:
    """One simulated run's units for the four tool-call headlines of ``--sequential``, with reference repeats.

    Schema accuracy and forced-call success are :class:`PairedModel` draws (a share ``forced`` of the cases are
    forced); trigger F1 and argument agreement come from :class:`TriggerModel` and an argument model where
    ``args_ambiguous`` of the cases have two acceptable argument sets (chosen 70/30 by each answer independently),
    measured on cases where both answers called; the reference answers a random ``repeat_share`` of the cases twice
    (the floor). ``shifts`` are the candidate's population differences per headline (<= 0 for floor metrics)."""

    shifts: dict[str, float]
    forced: float = 0.3
    repeat_share: float = 0.10
    args_ambiguous: float = 0.3
    trigger: TriggerModel = TriggerModel()

    def args_agreement(self) -> float:
        return 1 - self.args_ambiguous + self.args_ambiguous * (0.7 ** 2 + 0.3 ** 2)

    def draw(self, n: int, rng: np.random.Generator) -> list:
        """HeadlineUnits / FloorHeadlineUnits for ``n`` cases in draw order (positions 1..n)."""
        from verifier.run.sequential_floor import FloorHeadlineUnits, RatioUnits

        pos = np.arange(1, n + 1)
        out: list = [HeadlineUnits("schema_accuracy", PairedModel(shift=self.shifts.get("schema_accuracy", 0.0))
                                   .draw(n, rng).astype(float), pos)]
        forced = rng.random(n) < self.forced
        fx = PairedModel(shift=self.shifts.get("forced_call_success", 0.0)).draw(int(forced.sum()), rng)
        out.append(HeadlineUnits("forced_call_success", fx.astype(float), pos[forced]))
        p = self.trigger.propensities(n, rng)
        miss = self.trigger.miss_for(self.shifts.get("trigger_f1", 0.0))
        t1, t2 = rng.random(n) < p, rng.random(n) < p
        c = (rng.random(n) < p) & (rng.random(n) >= miss)
        rep = np.zeros(n, dtype=bool)
        rep[rng.choice(n, size=max(1, int(np.ceil(self.repeat_share * n))), replace=False)] = True

        def tr(first: np.ndarray, other: np.ndarray, keep: np.ndarray) -> RatioUnits:
            tp, fp, fn = first & other, other & ~first, first & ~other
            return RatioUnits(tp[keep] * 1.0, (2 * tp + fp + fn)[keep] / 2.0, pos[keep])

        out.append(FloorHeadlineUnits("trigger_f1", tr(t1, c, np.ones(n, dtype=bool)), tr(t1, t2, rep)))
        garble = -self.shifts.get("argument_agreement", 0.0) / self.args_agreement()
        amb = rng.random(n) < self.args_ambiguous
        a1, a2, ac = (np.where(amb, rng.random(n) < 0.7, True) for _ in range(3))
        agree_c = (a1 == ac) & (rng.random(n) >= garble)
        both_c, both_f = t1 & c, t1 & t2 & rep
        out.append(FloorHeadlineUnits(
            "argument_agreement", RatioUnits(agree_c[both_c] * 1.0, np.ones(int(both_c.sum())), pos[both_c]),
            RatioUnits((a1 == a2)[both_f] * 1.0, np.ones(int(both_f.sum())), pos[both_f])))
        return out
