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
