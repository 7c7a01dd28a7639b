"""The sequential mode's settings: the fixed-n verdict's alpha, margins and minimums, plus its own.

Why a module of its own: the floor rule (:mod:`verifier.run.sequential_floor`) and the paired-difference rule
(:mod:`verifier.run.sequential`) both read it (and :func:`first_settled`, the one way both turn per-look flags into
a kept decision), and the second calls the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from verifier.run.verdict_policy import VerdictPolicy

#: Metrics where any shown difference matters, margin or not (a provider's forced calls failing).
ALWAYS_MATERIAL: frozenset[str] = frozenset({"forced_call_success"})
MIN_UNITS = 10  # below this a headline is not testable (issue 38), so it never settles


@dataclass
class SequentialPolicy:
    """The fixed-n verdict's error rate and margins (``VerdictPolicy``), and the sequential-only settings."""

    alpha: float
    margins: dict[str, float]
    always_material: frozenset[str] = ALWAYS_MATERIAL
    min_units: int = MIN_UNITS  # for a metric the verdict policy names no minimum for
    min_units_by_metric: dict[str, int] = field(default_factory=dict)  # the verdict policy's ``min_units``

    @classmethod
    def from_verdict(cls, policy: VerdictPolicy | None = None) -> SequentialPolicy:
        """The verdict policy's alpha, margins, material metrics and per-metric minimum of units: a sequential
        decision never settles a headline the fixed-n verdict would call not testable."""
        p = policy or VerdictPolicy()
        return cls(alpha=p.alpha, margins=dict(p.margins), always_material=frozenset(p.material),
                   min_units_by_metric=dict(p.min_units))

    def units_needed(self, metric: str) -> int:
        """Fewer units than this never settle ``metric``."""
        return max(1, self.min_units_by_metric.get(metric, self.min_units))


def first_settled(differs: np.ndarray, consistent: np.ndarray) -> tuple[int | None, str]:
    """(index of the first look where either flag holds, the decision there): a decision is the first crossing and
    it is kept; ``differs`` wins a tie (both at one look). ``(None, "open")`` when neither ever holds."""
    d_hit, c_hit = np.flatnonzero(differs), np.flatnonzero(consistent)
    d_at = int(d_hit[0]) if d_hit.size else None
    c_at = int(c_hit[0]) if c_hit.size else None
    at = min((i for i in (d_at, c_at) if i is not None), default=None)
    return at, "open" if at is None else "differs" if at == d_at else "consistent"
