"""History points keep full float precision (issue 41, item 4).

``load_points`` once went through ``DataFrame.to_json`` (10 significant digits): a KL of 6.665e-13 came back as 0
and the dashboard showed "0 [3.9e-16, 0]" (lower above upper); drift read the same rounded values. Values from
1e-15 to 1e6 go into a real SQLite history and must come back, and onto the dashboard, as the summary has them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from verifier.history import index_summary, load_points
from verifier.history.drift import DriftSettings, detect_drift
from verifier.records import Interval, SuiteManifest
from verifier.run.summary import EndpointInfo, EndpointSuiteResult, RunSummary

VALUES = [1e-15, 3.9e-16 + 6.665e-13, 6.665e-13, 1.234567e-9, 2.5e-6, 0.01234567, 0.5, 1.0, 98.7654321, 12345.678,
          1e6]


def _summary(run_id: str, started_at: str, scale: float = 1.0) -> RunSummary:
    """One endpoint per value, each with a kl_mean of that value (times ``scale``) and an interval around it."""
    eps = [EndpointInfo(name="ref", base_url="builtin:tiny", is_reference=True)]
    results = [EndpointSuiteResult(endpoint="ref", suite="logprob-core", kind="logprob", is_reference=True)]
    for i, v in enumerate(VALUES):
        name = f"e{i:02d}"
        eps.append(EndpointInfo(name=name, base_url="builtin:tiny"))
        v = v * scale
        results.append(EndpointSuiteResult(endpoint=name, suite="logprob-core", kind="logprob", metrics={
            "kl_mean": Interval(value=v, low=v * 0.5859, high=v * 1.7777, n=40, method="bootstrap")}))
    suites = [SuiteManifest(name="logprob-core", version="1", kind="logprob", case_count=40, content_hash="c" * 64)]
    return RunSummary(run_id=run_id, started_at=started_at, finished_at=started_at, verifier_version="0.1.0",
                      reference="ref", endpoints=eps, suites=suites, results=results)


def _same_4_digits(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and f"{a:.4g}" == f"{b:.4g}" and math.isclose(a, b, rel_tol=1e-12)


def test_points_equal_the_summary_from_1e_15_to_1e6(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    s = _summary("tiny-values", "2026-01-01T02:00:00Z")
    index_summary(s, db)
    points = {p.endpoint: p for p in load_points(db, metric="kl_mean")}
    assert len(points) == len(VALUES)
    for r in s.results[1:]:
        iv, p = r.metrics["kl_mean"], points[r.endpoint]
        assert _same_4_digits(p.value, iv.value) and _same_4_digits(p.ci_low, iv.low), (r.endpoint, p, iv)
        assert _same_4_digits(p.ci_high, iv.high) and p.ci_low <= p.value <= p.ci_high  # type: ignore[operator]
        assert p.value != 0.0


def test_drift_reads_the_same_full_precision_points(tmp_path: Path) -> None:
    """Five nights at 1e-13-scale KL, then a night 1000 times higher: rounded to 0 it could not be seen at all."""
    db = tmp_path / "h.sqlite"
    for night in range(5):
        index_summary(_summary(f"n{night}", f"2026-01-0{night + 1}T02:00:00Z", scale=1 + 0.01 * night), db)
    tonight = _summary("tonight", "2026-01-09T02:00:00Z", scale=1000.0)
    index_summary(tonight, db)
    report = detect_drift(tonight, db, DriftSettings(metrics=["kl_mean"]))
    tested = {t.endpoint: t for t in report.tests if t.metric == "kl_mean"}
    # the smallest value's series: history 1e-15 .. 1.04e-15, tonight 1e-12; read as 0 the history had no spread
    e00 = tested["e00"]
    assert e00.n_history == 5 and e00.current == pytest.approx(1e-12, rel=1e-12)
    assert e00.history_mean == pytest.approx(1.02e-15, rel=1e-9) and e00.history_sd > 0
    assert all(t.drift for t in tested.values()), [t.endpoint for t in tested.values() if not t.drift]


def test_dashboard_shows_the_summary_figures_not_zero(tmp_path: Path) -> None:
    from reports.dashboard import build_dashboard

    db = tmp_path / "h.sqlite"
    s = _summary("tiny-values", "2026-01-01T02:00:00Z")
    index_summary(s, db)
    view = build_dashboard(db, tmp_path / "dashboard.html")
    shown = {e.name: e.runs[0].figures["kl_mean"] for e in view.endpoints if e.name != "ref"}
    for r in s.results[1:]:
        iv = r.metrics["kl_mean"]
        m = re.fullmatch(r"(\S+) \[(\S+), (\S+)\] n=40", shown[r.endpoint])
        assert m, shown[r.endpoint]
        value, low, high = (float(x) for x in m.groups())
        for got, want in ((value, iv.value), (low, iv.low), (high, iv.high)):
            assert f"{got:.4g}" == f"{want:.4g}", (r.endpoint, shown[r.endpoint], iv)
