"""Progress counters (what the bar shows and the summary keeps), drawn or not."""

from __future__ import annotations

import io

from rich.console import Console

from verifier.run.progress import Progress


def test_counts_and_drawing():
    buf = io.StringIO()
    with Progress(total=5, display=True, console=Console(file=buf, force_terminal=True, width=120)) as p:
        p.set_label("toolcall-core")
        p.advance()
        p.advance(2, error=True, retried=3)
        p.advance(retried=1)
    assert (p.done, p.errors, p.retries) == (4, 2, 4)
    out = buf.getvalue()
    assert "toolcall-core" in out and "4/5" in out and "errors 2" in out and "retries 4" in out
    assert p.tally().startswith("4 exchanges, 2 errors, 4 retries")


def test_silent_when_not_displayed():
    buf = io.StringIO()
    with Progress(total=2, display=False, console=Console(file=buf)) as p:
        p.advance(2)
    assert p.done == 2 and buf.getvalue() == ""


def test_plain_lines_when_not_a_terminal():
    """Not a terminal and not --quiet: one plain line per interval, from a thread (a slow exchange still shows)."""
    import time

    buf = io.StringIO()
    with Progress(total=10, console=Console(file=buf), plain_interval_s=0.05) as p:
        p.set_label("toolcall-core")
        p.advance(3, error=True)
        time.sleep(0.3)
    lines = buf.getvalue().splitlines()
    assert len(lines) >= 2 and "\x1b[" not in buf.getvalue()
    assert lines[-1].startswith("progress toolcall-core: 3/10 exchanges, 3 errors, 0 retries, ")
    n = len(lines)
    time.sleep(0.2)
    assert len(buf.getvalue().splitlines()) == n  # the thread stopped with the run
