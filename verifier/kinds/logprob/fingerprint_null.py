"""How often the fingerprint names another variant when the endpoint serves the reference's: its p-value.

The fingerprint names the closest profile; the verdict used to call a candidate ``differs`` when a
non-reference profile beat the reference profile by a fixed 0.1 decades. That had no error control: a BF16
server whose decode logits carry numerical noise of sd 0.05 (batch shapes, reduction order, another GPU) has a
KL profile a little above the reference profile's floor, nearer the FP8-KV profile than the reference's, and
was named ``fp8-kv`` in 10 of 20 runs.

The statistic is the *gap* ``distance(candidate, reference profile) - min distance(candidate, other profile)``.
Its distribution under "the endpoint serves the reference variant" (A/A) is simulated here from the reference's
own next-token distributions in this run (its decode-path top-k lists, the rest of the vocabulary one tail
cell): a twin whose logits carry Gaussian noise of sd sigma, on the decode path only or on both paths, for every
sigma on :data:`NOISE_GRID` up to :data:`NOISE_SD_MAX` (the numerical non-determinism the fingerprint tolerates;
larger noise *is* a different numerical recipe). The p-value is the largest, over those A/A settings, of the
share of simulated twins with a gap at least the observed one: a composite null, so the false-alarm rate is at
most alpha at every setting. The false-alarm rate of the rule "name it when p <= alpha" is then measured on the
simulated twins, each judged leave-one-out against the others (as a fresh A/A run would be), at every setting; the
worst setting's rate is reported with its n. The margin is the gap at which p reaches alpha.

Limits: a single tail cell under-states how noise in the tail moves KL, and forced-path positions are proxied
by the decode path's distributions; ``benchmarks/kl_accuracy.py --fingerprint-aa`` measures the rate on the
built-in engine's real A/A runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel
from scipy.special import log_softmax

from verifier.kinds.logprob.fingerprint import KL_FLOOR, QS, KLProfile, ProfileLibrary

NOISE_SD_MAX = 0.05
NOISE_GRID = (0.0, 0.0125, 0.025, 0.0375, NOISE_SD_MAX)
NOISY_PATHS: tuple[tuple[str, ...], ...] = (("decode",), ("forced", "decode"))
N_NULL = 300  # simulated twins per A/A setting: the p-value's null and (leave-one-out) the false-alarm check
ALPHA = 0.05


class FingerprintCalibration(BaseModel):
    """What :func:`calibrate_gap` found; copied into ``extra["fingerprint"]``."""

    gap: float | None  # reference-profile distance minus the best other profile's (decades of KL, RMS)
    p_value: float | None
    margin: float | None  # the gap at which p_value reaches alpha
    false_alarm_rate: float | None  # share of A/A twins the rule names another profile for (worst setting)
    false_alarm_n: int = 0  # A/A twins per setting behind that rate (judged leave-one-out)
    alpha: float = ALPHA
    noise_sd_max: float = NOISE_SD_MAX
    method: str = "simulated A/A: reference's own distributions with logit noise sd <= noise_sd_max"


def reference_rows(tops: Iterable[dict[str, float]]) -> np.ndarray:
    """[N, k + 1] log-probabilities: each position's top-k (padded with -inf) and one tail cell (the rest)."""
    lists = [sorted(t.values(), reverse=True) for t in tops if t]
    if not lists:
        return np.zeros((0, 2))
    k = max(len(x) for x in lists)
    rows = np.full((len(lists), k + 1), -np.inf)
    for i, vals in enumerate(lists):
        rows[i, :len(vals)] = vals
        tail = 1.0 - float(np.exp(np.asarray(vals)).sum())
        rows[i, k] = np.log(max(tail, 1e-12))
    return log_softmax(rows, axis=1)


def _twin_kl(rows: np.ndarray, reps: int, n: int, sigma: float, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray]:
    """Per-position KL and same-top flags [reps, n] of ``reps`` twins with logit noise sd ``sigma``."""
    if sigma <= 0:
        return np.zeros((reps, n)), np.ones((reps, n))
    pick = rows[rng.integers(0, rows.shape[0], (reps, n))] if n != rows.shape[0] else np.broadcast_to(
        rows, (reps, *rows.shape))
    finite = np.isfinite(pick)
    lp = np.where(finite, pick, 0.0)
    noisy = np.where(finite, lp + sigma * rng.standard_normal(pick.shape, dtype=np.float32), -np.inf)
    q = log_softmax(noisy, axis=-1)
    kl = np.where(finite, np.exp(pick) * (lp - np.where(finite, q, 0.0)), 0.0).sum(axis=-1)
    same = (pick.argmax(axis=-1) == q.argmax(axis=-1)).astype(float)
    return np.maximum(kl, 0.0), same


def twin_features(rows: np.ndarray, positions: dict[str, int], sigma: float, noisy: tuple[str, ...], reps: int,
                  rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Profile features (as :func:`make_profile` computes them) of ``reps`` simulated A/A twins, vectorised."""
    feats: dict[str, np.ndarray] = {}
    for path, n in positions.items():
        kl, same = _twin_kl(rows, reps, n, sigma if path in noisy else 0.0, rng)
        logs = np.log10(np.maximum(kl, KL_FLOOR))
        for q, v in zip(QS, np.percentile(logs, QS, axis=1)):
            feats[f"{path}_log10_kl_p{q}"] = v
        feats[f"{path}_log10_kl_mean"] = np.log10(np.maximum(kl.mean(axis=1), KL_FLOOR))
        feats[f"{path}_same_top_x10"] = same.mean(axis=1) * 10.0
    return feats


def twin_profile(rows: np.ndarray, positions: dict[str, int], sigma: float, noisy: tuple[str, ...],
                 rng: np.random.Generator) -> KLProfile:
    """One simulated A/A twin's profile: logit noise sd ``sigma`` on the ``noisy`` paths, none elsewhere."""
    feats = twin_features(rows, positions, sigma, noisy, 1, rng)
    return KLProfile(features={k: float(v[0]) for k, v in feats.items()}, n_positions=dict(positions))


def _distances(feats: dict[str, np.ndarray], profile: KLProfile) -> np.ndarray | None:
    keys = sorted(set(feats) & set(profile.features))
    if not keys:
        return None
    d = np.stack([feats[k] - profile.features[k] for k in keys])
    return np.sqrt((d * d).mean(axis=0))


def gap(profile: KLProfile, library: ProfileLibrary) -> float | None:
    """distance to the reference profile minus the distance to the nearest other profile (> 0: another is nearer)."""
    out = _gaps({k: np.asarray([v]) for k, v in profile.features.items()}, library)
    return None if out is None else float(out[0])


def _gaps(feats: dict[str, np.ndarray], library: ProfileLibrary) -> np.ndarray | None:
    ref = library.profiles.get(library.reference)
    if ref is None:
        return None
    d_ref = _distances(feats, ref)
    others = [d for name, p in library.profiles.items() if name != library.reference
              and (d := _distances(feats, p)) is not None]
    if d_ref is None or not others:
        return None
    return d_ref - np.min(np.stack(others), axis=0)


def _null_gaps(rows: np.ndarray, positions: dict[str, int], library: ProfileLibrary, n: int,
               rng: np.random.Generator) -> dict[tuple[float, tuple[str, ...]], np.ndarray]:
    out = {}
    for sigma in NOISE_GRID:
        for noisy in NOISY_PATHS if sigma > 0 else NOISY_PATHS[:1]:
            g = _gaps(twin_features(rows, positions, sigma, noisy, n, rng), library)
            out[(sigma, noisy)] = np.zeros(0) if g is None else g
    return out


def _p_values(x: np.ndarray, null: dict[tuple[float, tuple[str, ...]], np.ndarray],
              own: tuple[float, tuple[str, ...]] | None = None) -> np.ndarray:
    """p-value of each gap in ``x``: the largest share, over A/A settings, of twins with a gap at least as large.

    ``own``: the setting ``x`` was drawn from, left out of its own count (leave-one-out: the share among the
    *other* twins of that setting), so the null twins double as fresh A/A runs for the false-alarm rate.
    """
    p = np.zeros(x.shape)
    for key, g in null.items():
        if not g.size:
            continue
        srt = np.sort(g)
        ge = srt.size - np.searchsorted(srt, x - 1e-12, side="left")
        p = np.maximum(p, ge / srt.size if key == own else (1.0 + ge) / (srt.size + 1.0))
    return p


@dataclass(frozen=True)
class AANull:
    """Simulated A/A gaps per setting (noise sd, noisy paths): one per reference, reused for every candidate."""

    gaps: dict[tuple[float, tuple[str, ...]], np.ndarray]
    alpha: float = ALPHA

    def p_value(self, observed: float) -> float:
        return float(_p_values(np.asarray([observed]), self.gaps)[0])

    @property
    def margin(self) -> float:
        """The smallest gap whose p-value is at most alpha."""
        pooled = np.unique(np.concatenate(list(self.gaps.values())))
        above = pooled[_p_values(pooled, self.gaps) <= self.alpha]
        return float(above.min()) if above.size else float(pooled.max()) + 1e-6

    @property
    def false_alarm_rate(self) -> float:
        """Worst setting's share of twins named (p <= alpha), each judged leave-one-out against the others."""
        return max(float(np.mean(_p_values(g, self.gaps, own=key) <= self.alpha)) for key, g in self.gaps.items())

    @property
    def n_per_setting(self) -> int:
        return min(g.size for g in self.gaps.values())


def aa_null(library: ProfileLibrary, rows: np.ndarray, positions: dict[str, int], *, seed: int = 0,
            n_null: int = N_NULL, alpha: float = ALPHA) -> AANull | None:
    """The A/A null for candidates measured on ``positions`` (path -> number of positions); None if not defined."""
    if rows.shape[0] == 0 or not positions or library.reference not in library.profiles:
        return None
    gaps = {k: g for k, g in _null_gaps(rows, positions, library, n_null, np.random.default_rng(seed)).items()
            if g.size}
    return AANull(gaps=gaps, alpha=alpha) if gaps else None


def calibrate_gap(candidate: KLProfile, library: ProfileLibrary, rows: np.ndarray, *, seed: int = 0,
                  n_null: int = N_NULL, alpha: float = ALPHA) -> FingerprintCalibration:
    """p-value of the candidate's gap under simulated A/A twins of the reference, and the rule's false-alarm rate.

    The rule is "name another profile when p <= alpha"; its false-alarm rate is measured leave-one-out on the
    twins themselves (each twin judged against the others), at every A/A setting, and the worst is reported.
    """
    observed = gap(candidate, library)
    positions = {path: n for path, n in candidate.n_positions.items() if path in ("forced", "decode")}
    null = aa_null(library, rows, positions, seed=seed, n_null=n_null, alpha=alpha) if observed is not None else None
    if observed is None or null is None:
        return FingerprintCalibration(gap=observed, p_value=None, margin=None, false_alarm_rate=None, alpha=alpha)
    return FingerprintCalibration(gap=observed, p_value=null.p_value(observed), margin=null.margin,
                                  false_alarm_rate=null.false_alarm_rate, false_alarm_n=null.n_per_setting,
                                  alpha=alpha)
