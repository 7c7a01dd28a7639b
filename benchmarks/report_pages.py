"""Size and load time of the pages issue #34 bounds: a 2,000-case run's report (< 3 MB, opens in < 2 s in
Chromium) and the history dashboard over hundreds of runs (< 5 MB).

    python benchmarks/report_pages.py --repeats 5 --runs 300

The report is rendered from the test fixture's 2,000-case summary (three endpoints, toolcall/agent/logprob suites,
600 disagreements per candidate with long untrusted text, 6,000 latency records); the dashboard from a generated
history of ``--runs`` nights with a real shift. Load time = navigation to the load event in headless Chromium
(tests/report/cdp.py), median of ``--repeats`` loads; the 390 px and 1280 px page widths are printed too.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reports.dashboard import render_dashboard  # noqa: E402
from reports.render import render_report  # noqa: E402
from tests.report.cdp import Browser  # noqa: E402
from tests.report.fixtures import build_history, make_summary, write_run  # noqa: E402
from tests.report.test_render import _many_disagreements  # noqa: E402


def chart_share(path: Path) -> str:
    """How many inline SVG charts the page holds and what share of its bytes they are."""
    html = path.read_text(encoding="utf-8")
    svgs = re.findall(r"<svg .*?</svg>", html, re.S)
    size = sum(len(s.encode("utf-8")) for s in svgs)
    share = 100 * size / max(1, len(html.encode("utf-8")))
    return f"{len(svgs)} charts, {size / 1e3:.0f} kB = {share:.0f}% of the bytes"


def load_times(browser: Browser, path: Path, repeats: int) -> tuple[list[float], dict[int, int]]:
    times, widths = [], {}
    for width in (1280, 390):
        browser.send("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1,
                     mobile=width < 600)
        for _ in range(repeats if width == 1280 else 1):
            browser.events.clear()
            t0 = time.perf_counter()
            browser.send("Page.navigate", url=path.resolve().as_uri())
            browser.wait_for("Page.loadEventFired")
            if width == 1280:
                times.append(time.perf_counter() - t0)
        widths[width] = browser.evaluate("document.documentElement.scrollWidth")
    return times, widths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--runs", type=int, default=300, help="nights in the generated history")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        summary, records = make_summary(n=2000)
        t0 = time.perf_counter()
        report = render_report(write_run(root / "big", _many_disagreements(summary, 600), records))
        render_s = time.perf_counter() - t0
        small, small_records = make_summary()
        t0 = time.perf_counter()
        fixture = render_report(write_run(root / "fixture", small, small_records))
        fixture_s = time.perf_counter() - t0
        db = build_history(root / "hist", args.runs, shift_at=args.runs - 10)
        t0 = time.perf_counter()
        dash = render_dashboard(db, root / "dashboard.html")
        dash_s = time.perf_counter() - t0
        with Browser(root / "profile") as b:
            b.send("Page.enable")
            for name, path, render_time, limit_mb in (("report, 120-case fixture", fixture, fixture_s, 3),
                                                      ("report, 2,000 cases", report, render_s, 3),
                                                      (f"dashboard, {args.runs} runs", dash, dash_s, 5)):
                times, widths = load_times(b, path, args.repeats)
                print(f"{name}: {path.stat().st_size / 1e6:.2f} MB (limit {limit_mb} MB), rendered in "
                      f"{render_time:.1f} s, load median {statistics.median(times):.2f} s over {len(times)} "
                      f"(min {min(times):.2f}, max {max(times):.2f}), page width at 1280/390 px: "
                      f"{widths[1280]}/{widths[390]}; {chart_share(path)}")


if __name__ == "__main__":
    main()
