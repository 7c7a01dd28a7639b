"""Drift: has an endpoint changed, judged against its own recent history, with the false-alarm rate controlled.

The question a team watching a provider asks every night is "did tonight differ from the usual?", not "is
tonight below a line?". Each (endpoint, suite, metric) is tested against the same endpoint's last ``window``
runs on the *same suite content hash* (a changed suite is not comparable). Two bases are tested when the
data exists: the metric itself (``value``) and the candidate-minus-reference difference (``vs_reference``),
which cancels anything that moved the reference too (a new suite version, a harness change).

Per-series test: a prediction-interval t test. Under "no change" tonight's value and the m historical values
are draws from one distribution, so ``(x - mean_h) / (s * sqrt(1 + 1/m))`` is t-distributed with m - 1
degrees of freedom. ``s`` is the larger of the historical spread and the within-run sampling error implied
by the runs' own 95% CIs: the spread captures night-to-night variation the CIs cannot see, and the floor
stops a perfectly stable history (a deterministic engine) from calling every tiny difference significant.
Taking the larger of two estimates of the same variance only makes the test more conservative (measured in
``tests/history``, 5 metrics, 10-run window, Holm at 5%: under 1% family-wise false alarms with pure sampling
noise, about 5% with a heavy 3-point night-to-night jitter that the CIs cannot see).

Multiplicity: all tests of one run form one family and are adjusted together, by Holm (default: controls the
family-wise error rate, i.e. P(any drift flagged | nothing changed) <= alpha, under any dependence between
metrics) or Benjamini-Hochberg (controls the expected share of false flags among flags). ``tests/history``
checks the A/A false-alarm rate on simulated histories.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from verifier import history as history_db
from verifier.history.model import MetricPoint
from verifier.records import Interval
from verifier.run.summary import RunSummary
from verifier.stats.multiple import adjust_pvalues

if TYPE_CHECKING:
    from verifier.history import DbArg

__all__ = [
    "DEFAULT_EXCLUDED",
    "DriftReport",
    "DriftSettings",
    "DriftTest",
    "detect_drift",
    "detect_drift_points",
    "series_test",
]

Z95 = 1.959963984540054

#: Speed is not identity: latency moves with load and network, so it is left out of drift unless asked for.
DEFAULT_EXCLUDED = (
    "latency_p50_s", "latency_p95_s", "latency_p99_s", "latency_mean_s", "ttft_p50_s", "tokens_per_s", "cache_bound",
)

#: What a history row measures: the metric itself, or its difference from the reference in the same run.
Basis = Literal["value", "vs_reference"]
BASES: tuple[Basis, ...] = ("value", "vs_reference")


class DriftSettings(BaseModel):
    """How drift is tested; the ``[drift]`` table of a policy file."""

    alpha: float = Field(0.05, gt=0, lt=1)
    method: Literal["holm", "bh"] = "holm"
    window: int = Field(10, ge=2)
    min_history: int = Field(5, ge=2)
    metrics: list[str] | None = None  # None = every metric except ``exclude``
    exclude: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDED))
    bases: list[Basis] = Field(default_factory=lambda: list(BASES))


class DriftTest(BaseModel):
    """One series tested: tonight's value against the endpoint's own recent history."""

    endpoint: str
    suite: str
    metric: str
    basis: str
    current: float
    history_mean: float
    history_sd: float
    sd_used: float
    n_history: int
    statistic: float
    p_value: float
    p_adjusted: float = 1.0
    drift: bool = False

    @property
    def direction(self) -> str:
        return "up" if self.current > self.history_mean else "down"


class DriftReport(BaseModel):
    """All drift tests of one run, adjusted together, plus what could not be tested and why."""

    run_id: str
    settings: DriftSettings
    tests: list[DriftTest] = Field(default_factory=list)
    untested: list[str] = Field(default_factory=list)  # "endpoint/suite/metric: reason"

    @property
    def drifted(self) -> list[DriftTest]:
        return [t for t in self.tests if t.drift]

    def for_endpoint(self, endpoint: str) -> list[DriftTest]:
        return [t for t in self.tests if t.endpoint == endpoint]

    @property
    def statement(self) -> str:
        """The false-alarm guarantee in one sentence, for reports and CI summaries."""
        s = self.settings
        if s.method == "holm":
            what = (
                f"Holm-adjusted across {len(self.tests)} tests: if nothing changed, the chance of any drift flag "
                f"in this run is at most {s.alpha:g}"
            )
        else:
            what = (
                f"Benjamini-Hochberg across {len(self.tests)} tests: expected share of false flags among flags "
                f"at most {s.alpha:g}"
            )
        return f"{what} (history window {s.window} runs, at least {s.min_history} needed, same suite hash)."


def _se(iv_low: float | None, iv_high: float | None) -> float | None:
    if iv_low is None or iv_high is None:
        return None
    return max(0.0, (iv_high - iv_low) / (2 * Z95))


def series_test(
    current: float,
    current_se: float | None,
    history: Sequence[float],
    history_se: Sequence[float | None],
) -> tuple[float, float, float, float] | None:
    """Prediction-interval t test of ``current`` against ``history``.

    Returns (statistic, two-sided p, history sd, sd used) or ``None`` when there is no variance information at
    all (identical history and no CIs), where a test would call any difference infinitely significant.
    """
    m = len(history)
    if m < 2:
        return None
    mean_h = sum(history) / m
    sd_h = math.sqrt(sum((v - mean_h) ** 2 for v in history) / (m - 1))
    ses = [s for s in (*history_se, current_se) if s is not None]
    sampling_sd = math.sqrt(sum(s * s for s in ses) / len(ses)) if ses else 0.0
    sd = max(sd_h, sampling_sd)
    diff = current - mean_h
    if sd == 0.0:
        return None
    t = diff / (sd * math.sqrt(1 + 1 / m))
    # t with m - 1 df even when the sampling floor is used: a normal reference there ignores the night-to-night
    # variance the floor cannot see and over-flags (measured: 7% family-wise at alpha 5% with 3-point jitter).
    from scipy.special import stdtr  # t CDF; scipy.special avoids stats' per-call overhead (imported when used)

    p = float(2 * stdtr(m - 1, -abs(t)))
    return t, min(1.0, p), sd_h, sd


def _current_points(summary: RunSummary) -> list[MetricPoint]:
    hashes = {m.name: m.content_hash for m in summary.suites}
    out: list[MetricPoint] = []
    for r in summary.results:
        base = dict(
            run_id=summary.run_id,
            started_at=summary.started_at,
            endpoint=r.endpoint,
            is_reference=r.is_reference,
            suite=r.suite,
            suite_hash=hashes.get(r.suite),
            kind=r.kind,
        )
        items: list[tuple[str, str, Interval]] = [("value", k, v) for k, v in r.metrics.items()]
        items += [("vs_reference", c.metric or k, c.difference) for k, c in r.comparisons.items()]
        for basis, name, iv in items:
            out.append(
                MetricPoint(**base, basis=basis, metric=name, value=iv.value, ci_low=iv.low, ci_high=iv.high, n=iv.n)
            )
    return out


def _wanted(metric: str, settings: DriftSettings) -> bool:
    if settings.metrics is not None:
        return metric in settings.metrics
    return metric not in settings.exclude


def detect_drift_points(
    run_id: str, current: Iterable[MetricPoint], history: Iterable[MetricPoint], settings: DriftSettings | None = None
) -> DriftReport:
    """Core of drift detection on typed rows (no database): used by ``detect_drift`` and the A/A simulation."""
    settings = settings or DriftSettings()
    cur = [p for p in current if p.value is not None and p.basis in settings.bases and _wanted(p.metric, settings)]
    started = min((p.started_at for p in cur), default="")
    series: dict[tuple, list[MetricPoint]] = defaultdict(list)
    for h in history:
        if h.run_id == run_id or h.value is None or h.started_at >= started:
            continue
        series[(h.endpoint, h.suite, h.suite_hash, h.metric, h.basis)].append(h)

    report = DriftReport(run_id=run_id, settings=settings)
    for p in cur:
        past = sorted(series.get((p.endpoint, p.suite, p.suite_hash, p.metric, p.basis), []),
                      key=lambda h: h.started_at)
        past = past[-settings.window :]
        label = f"{p.endpoint}/{p.suite}/{p.metric}" + (" (vs reference)" if p.basis == "vs_reference" else "")
        if len(past) < settings.min_history:
            report.untested.append(f"{label}: {len(past)} comparable runs in history, {settings.min_history} needed")
            continue
        current_value = p.value
        if current_value is None:  # never: ``cur`` holds measured points only (this narrows the type)
            continue
        past_values = [h.value for h in past if h.value is not None]  # all of them: None was skipped above
        res = series_test(float(current_value), _se(p.ci_low, p.ci_high), past_values,
                          [_se(h.ci_low, h.ci_high) for h in past])
        if res is None:
            report.untested.append(f"{label}: history has no variation and no confidence intervals")
            continue
        t, pval, sd_h, sd = res
        report.tests.append(
            DriftTest(
                endpoint=p.endpoint,
                suite=p.suite,
                metric=p.metric,
                basis=p.basis,
                current=float(current_value),
                history_mean=sum(past_values) / len(past_values),
                history_sd=sd_h,
                sd_used=sd,
                n_history=len(past),
                statistic=t,
                p_value=pval,
            )
        )
    adjusted = adjust_pvalues([t.p_value for t in report.tests], settings.method)
    for test, a in zip(report.tests, adjusted):
        test.p_adjusted = a
        test.drift = a <= settings.alpha
    return report


def detect_drift(summary: RunSummary, db_path: DbArg, settings: DriftSettings | None = None) -> DriftReport:
    """Test every metric of ``summary`` against the history in ``db_path`` (the run itself is excluded).

    ``db_path`` is anything the history package accepts (a SQLite path, a PostgreSQL URL, a location; ``None`` is
    the default database). Only the run's own endpoints' rows are read: a shared history holds many more.
    """
    endpoints = sorted({r.endpoint for r in summary.results})
    history = history_db.load_points(db_path, basis=None, endpoints=endpoints)
    return detect_drift_points(summary.run_id, _current_points(summary), history, settings)
