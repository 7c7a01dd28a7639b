"""Open real reports in headless chromium: no console error, no request, every chart drawn, hostile text inert.

Two reports are opened: one from a real ``verifier run`` (toolcall and agent suites, reference and a candidate served by
the scripted OpenAI-compatible server, where the candidate answers some requests with ``<script>`` and
``<img onerror>``), and one from the multi-suite fixture (KL charts: no built-in logprob suite runs yet).
Screenshots and a PDF print go to ``test-artifacts/``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.cdp import Browser, chromium_path
from tests.report.fixtures import build_history, make_summary, write_run
from verifier.run.summary import EndpointInfo, RunSummary

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (apt-get install chromium)"),
]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def _real_run(tmp: Path) -> Path:
    """A real run: `verifier run` (in-process CLI) against two scripted servers on 127.0.0.1."""
    cli = pytest.importorskip("verifier.cli")
    from typer.testing import CliRunner

    from verifier.testing import Reply, ScriptedServer, schema_responder

    def hostile(body: dict, ctx) -> Reply:  # noqa: ANN001 - RequestContext
        if ctx.request_index % 4 == 1:
            return Reply.text(HOSTILE)
        return schema_responder(body, ctx)

    out = tmp / "real-run"
    with ScriptedServer(schema_responder) as ref, ScriptedServer(hostile) as cand:
        res = CliRunner().invoke(cli.app, [
            "run", "--reference", f"ref={ref.base_url}", "--endpoint", f"cand={cand.base_url}",
            "--model", "scripted-model", "--suite", "toolcall-core", "--suite", "agent-smoke", "--limit", "6",
            "--trials", "2", "--out", str(out),
            "--no-history", "--quiet",
        ])
    assert res.exit_code == 0, res.output
    assert (out / "report.html").exists(), res.output
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from reports.dashboard import render_dashboard
    from reports.render import render_report
    from tests.report.test_render import _many_disagreements

    tmp = tmp_path_factory.mktemp("browser")
    real = _real_run(tmp)
    summary, records = make_summary()
    fixture = write_run(tmp / "fixture-run", summary, records)
    six = write_run(tmp / "six-endpoints", _six_endpoints(make_summary()[0]))
    big_summary, big_records = make_summary(n=2000)
    big = write_run(tmp / "big-run", _many_disagreements(big_summary, 600), big_records)
    db = build_history(tmp / "history", 120, shift_at=110, folders=2)
    return {"real-run": real / "report.html", "fixture": render_report(fixture), "six": render_report(six),
            "big": render_report(big), "dashboard": render_dashboard(db, tmp / "history" / "dashboard.html")}


def _six_endpoints(summary: RunSummary) -> RunSummary:
    """The fixture run with three more candidates (copies of the two under longer names): six endpoints."""
    extra = [("fp8-kv", "provider-a-fp8-kv-cache-eu-west"), ("int4-decode", "provider-b-int4-decode-weights"),
             ("fp8-kv", "provider-c-us-east-1-serving")]
    for src, name in extra:
        summary.endpoints.append(EndpointInfo(name=name, base_url=f"http://127.0.0.1:9/{name}", model="verifier-tiny"))
        summary.results += [r.model_copy(update={"endpoint": name}, deep=True) for r in summary.results
                            if r.endpoint == src]
    return summary


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    with Browser(tmp_path_factory.mktemp("chromium-profile")) as b:
        for domain in ("Page", "Runtime", "Log", "Network"):
            b.send(f"{domain}.enable")
        b.send("Emulation.setDeviceMetricsOverride", width=1366, height=768, deviceScaleFactor=1, mobile=False)
        yield b


PAGE_STATE = """(() => {
  const charts = [...document.querySelectorAll('figure.chart')].map(f => {
    const svg = f.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : null;
    const drawn = !!svg && box.width > 50 && box.height > 50 && svg.querySelectorAll('path, use').length > 3;
    return {id: f.dataset.chart, drawn: drawn};
  });
  return {
    pwned: window.__pwned === undefined ? null : window.__pwned,
    title: document.title,
    verdictRows: document.querySelectorAll('#verdict-table thead th[data-endpoint]').length,
    charts,
    images: document.images.length,
    scripts: document.scripts.length,
    hostileShownAsText: document.body.textContent.includes('<script>window.__pwned'),
    pageWidth: document.documentElement.scrollWidth,
  };
})()"""


@pytest.mark.parametrize("which", ["real-run", "fixture"])
def test_report_in_chromium(browser: Browser, reports: dict[str, Path], which: str) -> None:
    browser.send("Emulation.setDeviceMetricsOverride", width=1366, height=768, deviceScaleFactor=1, mobile=False)
    state, other_requests, _ = _open(browser, reports[which])

    ARTIFACTS.mkdir(exist_ok=True)
    shot = browser.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    import base64

    (ARTIFACTS / f"report-{which}.png").write_bytes(base64.b64decode(shot["data"]))
    pdf = base64.b64decode(browser.send("Page.printToPDF", printBackground=False)["data"])
    (ARTIFACTS / f"report-{which}.pdf").write_bytes(pdf)
    assert pdf.startswith(b"%PDF") and len(pdf) > 10_000

    errors = [e["params"] for e in browser.events if e["method"] == "Runtime.exceptionThrown"]
    errors += [e["params"] for e in browser.events
               if e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert")]
    errors += [e["params"]["entry"] for e in browser.events
               if e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"]
    assert not errors, f"console errors in {which}: {errors}"
    assert other_requests == [], "the report made a network request"

    assert state["pwned"] is None, "model output executed as script"
    assert state["title"].startswith("verifier report")
    assert state["images"] == 0 and state["scripts"] == 1
    assert state["hostileShownAsText"], "hostile model output should be visible as text"
    assert state["verdictRows"] == (2 if which == "real-run" else 3)
    assert state["charts"] and all(c["drawn"] for c in state["charts"]), state["charts"]
    assert state["pageWidth"] <= 1366 + 2, "report is wider than a laptop screen"


def test_disagreement_filter_works(browser: Browser, reports: dict[str, Path]) -> None:
    _open(browser, reports["fixture"])
    counts = browser.evaluate("""(() => {
      const visible = () => [...document.querySelectorAll('#disagreements tbody tr')]
        .filter(r => getComputedStyle(r).display !== 'none').length;
      const all = visible();
      const sel = document.getElementById('f-endpoint');
      sel.value = 'int4-decode'; sel.dispatchEvent(new Event('change'));
      const one = visible();
      const kind = document.getElementById('f-kind');
      kind.value = 'trajectory'; kind.dispatchEvent(new Event('change'));
      const both = visible();
      const text = document.getElementById('f-text');
      sel.value = ''; kind.value = ''; sel.dispatchEvent(new Event('change'));
      text.value = 'tc-'; text.dispatchEvent(new Event('input'));
      return {all, one, both, search: visible(), label: document.getElementById('f-count').textContent};
    })()""")
    assert counts["all"] > counts["one"] > counts["both"] == 1
    assert 0 < counts["search"] < counts["all"]
    assert counts["label"] == f"{counts['search']} of {counts['all']} shown"


def _open(browser: Browser, path: Path) -> tuple[dict, list[str], list]:
    url = path.resolve().as_uri()
    browser.events.clear()
    browser.send("Page.navigate", url=url)
    browser.wait_for("Page.loadEventFired")
    browser.drain(1.0)
    state = browser.evaluate(PAGE_STATE)
    requests = [e["params"]["request"]["url"] for e in browser.events if e["method"] == "Network.requestWillBeSent"]
    errors = [e for e in browser.events if e["method"] in ("Runtime.exceptionThrown", "Log.entryAdded")
              and (e["method"] == "Runtime.exceptionThrown" or e["params"]["entry"]["level"] == "error")]
    return state, [u for u in requests if u != url], errors


def test_detectors_catch_an_injected_leak(browser: Browser, reports: dict[str, Path], tmp_path: Path) -> None:
    """Negative control: markup injected *around* the escaping is caught, so the checks above can fail."""
    html = reports["fixture"].read_text(encoding="utf-8")
    inject = '<img src="http://127.0.0.1:9/leak.png"><script>window.__pwned = 5</script>'
    # 1. with our CSP in place the injection is blocked, and the block is visible as a console error
    guarded = tmp_path / "guarded.html"
    guarded.write_text(html.replace("<main>", "<main>" + inject, 1), encoding="utf-8")
    state, requests, errors = _open(browser, guarded)
    assert state["pwned"] is None
    assert errors, "a CSP violation should surface as a console error"
    # chromium announces the request, then CSP blocks it before anything leaves: the strict check above
    # (no request announced at all) would have failed on this page
    assert requests == ["http://127.0.0.1:9/leak.png"]
    blocked = [e["params"].get("blockedReason") for e in browser.events if e["method"] == "Network.loadingFailed"]
    assert "csp" in blocked
    # 2. without the CSP the same injection runs and requests: the page-state and network checks see both
    bare = tmp_path / "bare.html"
    no_csp = html.split('<meta http-equiv="Content-Security-Policy"', 1)
    no_csp = no_csp[0] + no_csp[1].split(">", 1)[1]
    bare.write_text(no_csp.replace("<main>", "<main>" + inject, 1), encoding="utf-8")
    state, requests, _ = _open(browser, bare)
    assert state["pwned"] == 5
    assert "http://127.0.0.1:9/leak.png" in requests


LAYOUT = """(() => {
  const box = el => el ? el.getBoundingClientRect() : null;
  const table = document.getElementById('verdict-table');
  const firstTable = document.querySelector('table');
  const heads = [...document.querySelectorAll('#headlines li.headline')];
  return {
    pageWidth: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
    tableWidth: table ? table.scrollWidth : null,
    tableBox: table ? table.parentElement.clientWidth : null,
    headlines: heads.map(h => ({status: h.dataset.status, right: box(h).right, text: h.textContent.trim()})),
    headlinesAboveTables: heads.length > 0 && box(heads[heads.length - 1]).bottom <= box(firstTable).top,
    charts: [...document.querySelectorAll('figure.chart svg')].map(s => box(s).width > 50 && box(s).height > 50),
  };
})()"""


def _load(browser: Browser, path: Path, width: int) -> tuple[dict, float, list, list[str]]:
    """Open ``path`` at ``width`` px: layout facts, seconds to the load event, console errors, other requests."""
    import time

    browser.send("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=width < 600)
    url = path.resolve().as_uri()
    browser.events.clear()
    t0 = time.monotonic()
    browser.send("Page.navigate", url=url)
    browser.wait_for("Page.loadEventFired")
    load_s = time.monotonic() - t0
    browser.drain(0.5)
    errors = [e for e in browser.events if e["method"] == "Runtime.exceptionThrown"
              or (e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    requests = [e["params"]["request"]["url"] for e in browser.events if e["method"] == "Network.requestWillBeSent"]
    return browser.evaluate(LAYOUT), load_s, errors, [u for u in requests if u != url]


def _shot(browser: Browser, name: str, width: int) -> None:
    import base64

    ARTIFACTS.mkdir(exist_ok=True)
    shot = browser.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": width, "height": 1600, "scale": 1})
    (ARTIFACTS / f"{name}-{width}.png").write_bytes(base64.b64decode(shot["data"]))


@pytest.mark.parametrize("which", ["real-run", "fixture", "six"])
def test_headlines_and_verdict_table_fit_laptop_and_phone(browser: Browser, reports: dict[str, Path],
                                                          which: str) -> None:
    """Headlines first; at 1280 px nothing scrolls sideways (six endpoints included); at 390 px the headlines wrap
    inside the screen and the verdict table fits its box up to four endpoints."""
    for width in (1280, 390):
        state, _, errors, requests = _load(browser, reports[which], width)
        _shot(browser, f"report-{which}", width)
        assert not errors and not requests
        assert state["headlinesAboveTables"], "a table is drawn before the headlines end"
        assert [h["status"] for h in state["headlines"]][0] == "reference"
        assert all(h["right"] <= width for h in state["headlines"]), state["headlines"]
        assert state["pageWidth"] <= width, f"page scrolls sideways at {width} px: {state['pageWidth']}"
        if width == 1280 or which != "six":
            assert state["tableWidth"] <= state["tableBox"], f"verdict table scrolls at {width} px: {state}"
    assert len(state["headlines"]) == {"real-run": 2, "fixture": 3, "six": 6}[which]


def test_two_thousand_case_report_opens_fast(browser: Browser, reports: dict[str, Path]) -> None:
    path = reports["big"]
    assert path.stat().st_size < 3_000_000
    times = []
    for _ in range(3):
        state, load_s, errors, requests = _load(browser, path, 1280)
        times.append(load_s)
    assert not errors and not requests and state["pageWidth"] <= 1280
    assert sorted(times)[1] < 2.0, f"median load {sorted(times)[1]:.2f} s"


def test_dashboard_in_chromium(browser: Browser, reports: dict[str, Path]) -> None:
    path = reports["dashboard"]
    assert path.stat().st_size < 5_000_000
    for width in (1280, 390):
        state, _, errors, requests = _load(browser, path, width)
        _shot(browser, "dashboard", width)
        assert not errors, errors
        assert requests == [], "the dashboard made a network request"
        assert state["pageWidth"] <= width
        assert state["charts"] and all(state["charts"])
    pwned = browser.evaluate("window.__pwned === undefined")
    assert pwned
