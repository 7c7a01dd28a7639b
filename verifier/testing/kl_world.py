"""A simulated world for measuring the KL interval's coverage: prompts, several sequences per prompt, tokens.

Why here (not in a test file): the coverage test (``tests/kinds/logprob/test_kl_coverage.py``) and the benchmark that
sets :data:`verifier.kinds.logprob.cluster_ci.MIN_CLUSTERS` (``benchmarks/kl_coverage.py``) must measure the same
world. A run samples several continuations per prompt (``kl_samples``, 3 by default); they share the prompt, so their
KL levels are correlated, and the population a verdict generalises over is prompts. Per-token KL here is

    value = prompt level * continuation level * token noise,   each factor lognormal(0, sd)

with prompt-to-prompt sd ``prompt_sd`` (between prompts), continuation sd ``sequence_sd`` (between the sequences
of one prompt) and token sd ``token_sd``; sequence lengths are uniform, independent of the levels, so the true
per-token mean is ``exp((prompt_sd**2 + sequence_sd**2 + token_sd**2) / 2)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class World:
    """Sizes and spreads of one simulated setting."""

    prompts: int
    sequences_per_prompt: int = 3
    prompt_sd: float = 0.5
    sequence_sd: float = 0.5
    token_sd: float = 1.0
    min_len: int = 5
    max_len: int = 40

    @property
    def truth(self) -> float:
        """The per-token mean the interval should cover."""
        return float(np.exp((self.prompt_sd**2 + self.sequence_sd**2 + self.token_sd**2) / 2))


@dataclass(frozen=True)
class Draw:
    """One simulated run: per-token values, each token's sequence label and its prompt label."""

    values: np.ndarray
    sequence: np.ndarray
    prompt: np.ndarray


def draw(world: World, rng: np.random.Generator) -> Draw:
    """One run's per-token values in ``world``."""
    g, s = world.prompts, world.sequences_per_prompt
    lengths = rng.integers(world.min_len, world.max_len + 1, g * s)
    level = np.repeat(rng.lognormal(0.0, world.prompt_sd, g), s) * rng.lognormal(0.0, world.sequence_sd, g * s)
    seq = np.repeat(np.arange(g * s), lengths)
    values = level[seq] * rng.lognormal(0.0, world.token_sd, int(lengths.sum()))
    return Draw(values=values, sequence=seq, prompt=seq // s)


@dataclass(frozen=True)
class EmpiricalWorld:
    """A world resampled from a real run: prompts drawn with replacement from the run's prompts, then each prompt's
    sequences drawn with replacement from that prompt's sampled sequences (per-token values as measured).

    Its population is the run's own prompts, so its truth is known exactly: the per-token ratio mean the two-stage
    draw has in expectation. It keeps what a lognormal world cannot: identical samples of one prompt, prompt groups
    (text vs chat vs tool) far apart, per-token values that are mostly tiny with a few large ones.
    """

    sequences: tuple[tuple[np.ndarray, ...], ...]  # per prompt, its sequences' per-token values
    prompts: int
    sequences_per_prompt: int = 3

    @property
    def truth(self) -> float:
        num = sum(float(np.mean([s.sum() for s in p])) for p in self.sequences)
        den = sum(float(np.mean([s.size for s in p])) for p in self.sequences)
        return num / den


def draw_empirical(world: EmpiricalWorld, rng: np.random.Generator) -> Draw:
    """One run of ``world.prompts`` prompts x ``world.sequences_per_prompt`` sequences, resampled from a real run."""
    values: list[np.ndarray] = []
    seq: list[np.ndarray] = []
    prompt: list[np.ndarray] = []
    k = 0
    for j, pi in enumerate(rng.integers(0, len(world.sequences), world.prompts)):
        own = world.sequences[int(pi)]
        for si in rng.integers(0, len(own), world.sequences_per_prompt):
            s = own[int(si)]
            values.append(s)
            seq.append(np.full(s.size, k))
            prompt.append(np.full(s.size, j))
            k += 1
    return Draw(values=np.concatenate(values), sequence=np.concatenate(seq), prompt=np.concatenate(prompt))
