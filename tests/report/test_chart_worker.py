"""The chart worker: charts drawn in a forked process make the very same report, and every way the worker can
fail (it dies, it hangs, it is never started) still gives every chart, drawn in-process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from reports import chart_worker
from reports.chart_worker import ChartDrawer
from reports.render import render_report
from tests.report.fixtures import run_after_nights


def _pid() -> str:
    return str(os.getpid())


def _die_unless_in(parent: int) -> str:
    if os.getpid() != parent:
        os._exit(1)  # the worker process dies mid-job
    return "drawn in-process"


def _hang_unless_in(parent: int) -> str:
    if os.getpid() != parent:
        time.sleep(30)
    return "drawn in-process"


def _refuse(_: int) -> str:
    raise ValueError("a chart bug")


def test_report_drawn_by_the_worker_is_byte_identical(tmp_path: Path) -> None:
    """Run charts, history charts and latency included: the worker's report equals the in-process one."""
    run, db = run_after_nights(tmp_path, 3)
    in_process = render_report(run, db_path=db).read_bytes()
    with ChartDrawer(worker=True) as drawer:
        assert drawer.in_worker  # CI runs on Linux, where the worker is forked
        assert drawer.submit(_pid).result() != str(os.getpid())  # it really is another process
        by_worker = render_report(run, db_path=db, drawer=drawer).read_bytes()
    assert by_worker.count(b"<svg ") >= 6 and b'data-chart="hist' in by_worker
    assert by_worker == in_process


def test_a_dead_worker_means_charts_drawn_in_process() -> None:
    with ChartDrawer(worker=True) as drawer:
        assert drawer.submit(_die_unless_in, os.getpid()).result() == "drawn in-process"
        assert drawer.submit(_pid).result() == str(os.getpid())  # the broken pool is not used again


def test_a_hung_worker_is_waited_for_at_most_wait_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chart_worker, "WAIT_S", 0.5)
    with ChartDrawer(worker=True) as drawer:
        t0 = time.perf_counter()
        assert drawer.submit(_hang_unless_in, os.getpid()).result() == "drawn in-process"
    assert time.perf_counter() - t0 < 5


def test_a_chart_bug_is_raised_as_in_process() -> None:
    for drawer in (ChartDrawer(worker=True), ChartDrawer()):
        with drawer, pytest.raises(ValueError, match="a chart bug"):
            drawer.submit(_refuse, 0).result()


def test_without_a_worker_charts_are_drawn_in_process() -> None:
    drawer = ChartDrawer()
    assert not drawer.in_worker and drawer.submit(_pid).result() == str(os.getpid())
