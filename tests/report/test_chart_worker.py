"""The chart worker: charts drawn in a forked process make the very same report, and every way the worker can
fail (it dies, it hangs, it is never started) still gives every chart, drawn in-process."""

from __future__ import annotations

import contextlib
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


@pytest.mark.slow
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


def _live_manager_threads() -> list:
    import threading
    from concurrent.futures import process

    return [t for t in threading.enumerate() if isinstance(t, process._ExecutorManagerThread) and t.is_alive()]


@pytest.mark.parametrize("how", ["error", "clean"])
def test_stopping_leaves_no_manager_thread_for_the_exit_hook_to_race(how: str) -> None:
    """An early error (the drawer left by an exception, worker still warming up) or a clean close: when it returns,
    the pool's manager thread is gone, so the interpreter's exit hook cannot write to its closing wake-up pipe (the
    intermittent "Exception ignored ... Bad file descriptor" of issue 39)."""
    assert not _live_manager_threads()
    with pytest.raises(RuntimeError) if how == "error" else contextlib.nullcontext():
        with ChartDrawer(worker=True) as drawer:
            assert drawer.in_worker and _live_manager_threads()
            if how == "error":
                raise RuntimeError("endpoint unreachable")
    assert not _live_manager_threads()


@pytest.mark.slow
def test_early_error_exits_print_one_line_and_no_traceback(tmp_path: Path) -> None:
    """``verifier run`` against a port nobody listens on, several times (the traceback was intermittent): stderr is
    the one error line every time."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    for i in range(3):
        proc = subprocess.run([sys.executable, "-m", "verifier.cli", "run", "--reference", f"http://127.0.0.1:{port}/v1",
                               "--suite", "toolcall-smoke", "--out", str(tmp_path / f"r{i}"), "--no-history"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 3, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
