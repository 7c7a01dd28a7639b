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
