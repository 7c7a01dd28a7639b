"""KL intervals cover, and KL from top-k is never certified: seeded simulations on synthetic distributions (numpy).

Each coverage test also runs a broken method on the same simulations and checks that *it* fails the bar, so the
bar can fail: the old percentile cluster bootstrap, a k3 interval that treats tokens as independent, and the
interval with equal tails (its top misses low about twice the 2.5 % a 95 % interval promises per side).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax

from verifier.kinds.logprob.cluster_ci import MIN_CLUSTERS, UPPER_TAIL, cluster_mean_interval
from verifier.kinds.logprob.estimator import exact_kl, sampled_kl, topk_from_full, topk_kl
from verifier.kinds.logprob.stats import kl_statistics
from verifier.stats.intervals import bootstrap_mean
from verifier.testing.kl_world import World, draw

COVERAGE_BAR = 0.93
UPPER_MISS_BAR = 0.035  # top under the truth: nominal 2.5 %, plus room for 600 simulations' error (sd 0.6 pts)


def _skewed_clusters(rng: np.random.Generator, g: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-token values like per-token KL: positive, right-skewed, a level per sequence; the true ratio mean."""
    lengths = rng.integers(5, 41, g)
    level = rng.lognormal(0.0, 0.5, g)
    values = np.concatenate([lv * rng.lognormal(0.0, 1.0, n) for lv, n in zip(level, lengths)])
    seq = np.repeat(np.arange(g), lengths)
    return values, seq, float(np.exp(0.5**2 / 2 + 1.0**2 / 2))


@pytest.mark.slow
def test_cluster_bootstrap_t_covers_where_the_percentile_bootstrap_did_not() -> None:
    rng = np.random.default_rng(11)
    sims = 400
    for g in (MIN_CLUSTERS, 2 * MIN_CLUSTERS):
        ours = old = 0
        for i in range(sims):
            values, seq, truth = _skewed_clusters(rng, g)
            iv = cluster_mean_interval(values, seq, n_boot=999, seed=i, log_scale=True)  # as KL ships
            ours += iv.low <= truth <= iv.high
            pct = bootstrap_mean(values, clusters=seq, n_boot=999, seed=i)
            old += pct.low <= truth <= pct.high
        assert ours / sims >= COVERAGE_BAR, f"{g} sequences: coverage {ours / sims:.3f}"
        assert old / sims < COVERAGE_BAR, f"the broken method passes too ({old / sims:.3f}): the bar cannot fail"


@pytest.mark.slow
def test_prompt_clusters_cover_where_sequence_clusters_do_not() -> None:
    """Three sequences per prompt share the prompt's KL level (between-prompt AND between-continuation spread,
    ``verifier.testing.kl_world``): at the minimum number of prompts the interval clustered by prompt covers; the same
    interval clustered by sequence (broken on purpose: the prompt's sequences taken as independent) does not. Its top
    misses low (under the true KL) at most 3.5 %; with equal tails it does not (seed 38: 11 vs 33 of 600, bar 21)."""
    world = World(prompts=MIN_CLUSTERS, sequences_per_prompt=3, prompt_sd=0.75, sequence_sd=0.35, token_sd=1.0)
    rng = np.random.default_rng(38)
    sims = 600
    by_prompt = by_sequence = top_low = equal_top_low = 0
    for i in range(sims):
        d = draw(world, rng)
        iv = cluster_mean_interval(d.values, d.prompt, n_boot=2000, seed=i, log_scale=True)
        by_prompt += iv.low <= world.truth <= iv.high
        top_low += iv.high < world.truth  # the side a false "KL is small" (consistent) comes from
        equal = cluster_mean_interval(d.values, d.prompt, n_boot=2000, seed=i, log_scale=True, upper_tail=None)
        equal_top_low += equal.high < world.truth
        bad = cluster_mean_interval(d.values, d.sequence, n_boot=2000, seed=i, log_scale=True)
        by_sequence += bad.low <= world.truth <= bad.high
    assert by_prompt / sims >= COVERAGE_BAR, f"{MIN_CLUSTERS} prompts x 3: coverage {by_prompt / sims:.3f}"
    assert top_low / sims <= UPPER_MISS_BAR, f"the top missed low {top_low / sims:.3f} of the time"
    assert by_sequence / sims < COVERAGE_BAR, (
        f"sequences as clusters pass too ({by_sequence / sims:.3f}): the bar cannot fail")
    assert equal_top_low / sims > UPPER_MISS_BAR, (
        f"equal tails pass too ({equal_top_low / sims:.3f}): the upper-miss bar cannot fail")


def test_the_upper_end_is_stricter_and_the_lower_end_unchanged() -> None:
    """Only the top (what ``consistent`` rests on) moves: the lower end (what ``differs`` rests on) is the same
    number with or without the stricter upper level, and the top is higher with it."""
    d = draw(World(prompts=MIN_CLUSTERS, prompt_sd=0.75, sequence_sd=0.35), np.random.default_rng(3))
    iv = cluster_mean_interval(d.values, d.prompt, seed=1, log_scale=True)
    equal = cluster_mean_interval(d.values, d.prompt, seed=1, log_scale=True, upper_tail=None)
    assert UPPER_TAIL < 0.025 and (iv.value, iv.low) == (equal.value, equal.low)
    assert iv.high is not None and equal.high is not None and equal.low is not None and equal.value is not None
    assert iv.high > equal.high > equal.value > equal.low


def test_below_the_minimum_number_of_prompts_there_is_no_interval() -> None:
    d = draw(World(prompts=MIN_CLUSTERS - 1), np.random.default_rng(1))
    assert np.unique(d.sequence).size >= MIN_CLUSTERS  # enough sequences, too few prompts
    iv = cluster_mean_interval(d.values, d.prompt)
    assert iv.value is not None and iv.low is None and "no interval" in (iv.method or "")


def test_no_interval_below_the_minimum_number_of_sequences() -> None:
    values, seq, _ = _skewed_clusters(np.random.default_rng(0), MIN_CLUSTERS - 1)
    iv = cluster_mean_interval(values, seq)
    assert iv.value is not None and iv.low is None and iv.high is None and "no interval" in (iv.method or "")


def _prompt(rng: np.random.Generator, positions: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """A prompt's reference distributions p and a candidate's logit shift direction, per position."""
    base = -1.1 * np.log(np.arange(1, vocab + 1))
    p = log_softmax(base[None, :] + rng.standard_normal((positions, vocab)) * 1.5, axis=1)
    return p, rng.standard_normal((positions, vocab)) * float(rng.uniform(0.05, 0.3))


def _kl_at(p: np.ndarray, shift: np.ndarray, f: float) -> np.ndarray:
    return exact_kl(p, log_softmax(p + f * shift, axis=1))


@pytest.mark.slow
def test_sampled_k3_is_unbiased_and_its_interval_covers() -> None:
    """Each sample is a sequence whose tokens are drawn from p; the candidate's drift differs per sample (a sampled
    continuation lands where the candidate is more or less off), so tokens of one sequence are correlated, and the
    samples of one prompt share its distributions: the prompt is the cluster, as scoring has it."""
    rng = np.random.default_rng(5)
    prompts = [_prompt(rng, int(rng.integers(8, 30)), 200) for _ in range(MIN_CLUSTERS)]
    levels = np.array([0.4, 1.0, 2.5])  # per-sample scale of the candidate's shift, equally likely
    drift = lambda n: rng.choice(levels, n)  # noqa: E731
    # truth: per-token KL averaged over positions and the drift distribution (equal samples per prompt)
    fs = levels
    truth = float(np.mean([np.mean([_kl_at(p, d, f) for f in fs], axis=0).mean() * p.shape[0] for p, d in prompts])
                  * len(prompts) / sum(p.shape[0] for p, _ in prompts))
    sims, samples = 300, 2
    cover = naive = 0
    estimates = []
    for i in range(sims):
        k3, seq = [], []
        for j, (p, d) in enumerate(prompts):
            cdf = np.exp(p).cumsum(axis=1)
            rows = np.arange(p.shape[0])
            for f in drift(samples):
                x = np.minimum((cdf < rng.random(p.shape[0])[:, None] * cdf[:, -1:]).sum(axis=1), p.shape[1] - 1)
                q = log_softmax(p + f * d, axis=1)
                k3.append(sampled_kl(p[rows, x], q[rows, x]).k3)
                seq.append(np.full(p.shape[0], j))
        values, clusters = np.concatenate(k3), np.concatenate(seq)
        iv = cluster_mean_interval(values, clusters, n_boot=999, seed=i, log_scale=True)
        estimates.append(iv.value)
        cover += iv.low <= truth <= iv.high
        tok = bootstrap_mean(values, n_boot=999, seed=i)  # broken on purpose: tokens as independent
        naive += tok.low <= truth <= tok.high
    est = np.asarray(estimates)
    assert abs(est.mean() - truth) < 3 * est.std() / np.sqrt(sims), (est.mean(), truth)  # unbiased
    assert cover / sims >= COVERAGE_BAR, f"k3 coverage {cover / sims:.3f}"
    assert naive / sims < COVERAGE_BAR, f"a token-level interval passes too ({naive / sims:.3f}): the bar cannot fail"


def test_exact_kl_three_times_the_margin_is_not_certified_from_top20() -> None:
    """A candidate whose only change is in the tail: exact KL ~0.031, a 0.01 margin. The top-20 figures must not
    yield a mean KL (only a lower bound, far below), and the sampled k3 interval must reach above the margin."""
    rng = np.random.default_rng(0)
    n, vocab = 400, 2000
    base = -1.2 * np.log(np.arange(1, vocab + 1))
    p = log_softmax(base[None, :] + rng.standard_normal((n, vocab)), axis=1)
    noise = rng.standard_normal((n, vocab)) * 0.42
    top = np.zeros((n, vocab), dtype=bool)
    np.put_along_axis(top, np.argsort(-p, axis=1)[:, :20], True, axis=1)
    noise[top] = rng.standard_normal(int(top.sum())) * 0.02
    q = log_softmax(p + noise, axis=1)
    exact = exact_kl(p, q)
    assert 0.028 < exact.mean() < 0.034
    seq = np.repeat(np.arange(20), n // 20)
    est = topk_kl(topk_from_full(p, 20), topk_from_full(q, 20))
    st = kl_statistics(est.kl, seq, kl_lower=est.lower, tail_mass=est.ref_tail, topk=True)
    metrics = st.metrics()
    assert "kl_mean" not in metrics  # never a "mean KL" from top-k
    lower = metrics["kl_topk_lower"]
    assert lower.high is not None and lower.high < 0.01 < exact.mean()  # a lower bound, far below: says nothing
    assert metrics["kl_tail_mass"].value > 0.3  # and the tail it cannot see is reported
    # the unbiased estimator on tokens sampled from p: its interval does not certify KL < 0.01
    cdf = np.exp(p).cumsum(axis=1)
    x = np.minimum((cdf < rng.random(n)[:, None] * cdf[:, -1:]).sum(axis=1), vocab - 1)
    k3 = sampled_kl(p[np.arange(n), x], q[np.arange(n), x]).k3
    iv = cluster_mean_interval(k3, seq)
    assert iv.high is not None and iv.high > 0.01
    assert iv.low is not None and iv.low <= exact.mean() <= iv.high
