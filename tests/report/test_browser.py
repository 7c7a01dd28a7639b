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
from tests.report.fixtures import build_history, make_summary, tiny_history, write_run
from verifier.run.summary import EndpointInfo, RunSummary

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,  # the module fixture runs a real run and starts Chromium: seconds before the first test
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
    assert "gate: " in res.output and "under <default policy>, judged by each candidate's verdict" in res.output
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from reports.dashboard import render_dashboard
    from reports.render import render_report
    from tests.report.test_render import _identical_pairs, _many_disagreements

    tmp = tmp_path_factory.mktemp("browser")
    real = _real_run(tmp)
    summary, records = make_summary()
    fixture = write_run(tmp / "fixture-run", summary, records)
    six = write_run(tmp / "six-endpoints", _six_endpoints(make_summary()[0]))
    big_summary, big_records = make_summary(n=2000)
    big = write_run(tmp / "big-run", _many_disagreements(big_summary, 600), big_records)
    db = build_history(tmp / "history", 120, shift_at=110, folders=2)
    same_summary, same_records = make_summary()
    same = write_run(tmp / "identical-pairs", _identical_pairs(same_summary), same_records)
    tiny_db, _ = tiny_history(tmp / "tiny")
    return {"real-run": real / "report.html", "fixture": render_report(fixture), "six": render_report(six),
            "big": render_report(big), "dashboard": render_dashboard(db, tmp / "history" / "dashboard.html"),
            "identical": render_report(same), "tiny-dashboard": render_dashboard(tiny_db, tmp / "tiny" / "d.html")}


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
@pytest.mark.slow
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
    assert all(c["drawn"] for c in state["charts"]), state["charts"]
    assert state["charts"] or which == "real-run"  # six cases of a scripted server: nothing worth a chart there
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


@pytest.mark.slow
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
@pytest.mark.slow
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


@pytest.mark.slow
def test_two_thousand_case_report_opens_fast(browser: Browser, reports: dict[str, Path]) -> None:
    path = reports["big"]
    assert path.stat().st_size < 3_000_000
    times = []
    for _ in range(3):
        state, load_s, errors, requests = _load(browser, path, 1280)
        times.append(load_s)
    assert not errors and not requests and state["pageWidth"] <= 1280
    assert sorted(times)[1] < 2.0, f"median load {sorted(times)[1]:.2f} s"


@pytest.mark.slow
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


# ---------------------------------------------------------------------------------------------------------------
# issue 41: what a reader sees at 1280 and 390 px
# ---------------------------------------------------------------------------------------------------------------

READER_CHECKS = """(() => {
  const vw = window.innerWidth;
  const visible = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  // 1. text under 10 CSS px: SVG text at its rendered scale, HTML text by its computed size
  const small = [];
  for (const t of document.querySelectorAll('svg text')) {
    if (!visible(t)) continue;
    const m = t.getScreenCTM();
    const px = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
    if (px < 10) small.push('svg:' + t.textContent.slice(0, 30) + ':' + px.toFixed(1));
  }
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('svg') || !visible(el)) continue;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    const px = parseFloat(getComputedStyle(el).fontSize);
    if (own && px < 10) small.push(el.tagName + ':' + el.textContent.trim().slice(0, 30) + ':' + px);
  }
  // 2. elements wider than the viewport, outside a container that scrolls them
  const scrolls = el => { for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const ox = getComputedStyle(p).overflowX; if (ox === 'auto' || ox === 'scroll') return true; } return false; };
  const wide = [];
  for (const el of document.querySelectorAll('body *')) {
    if (!visible(el) || scrolls(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.right > vw + 1 || r.left < -1) {
      wide.push(`${el.tagName}#${el.id}: ${Math.round(r.left)}..${Math.round(r.right)} ${el.textContent.slice(0, 40)}`);
    }
  }
  // 3. words broken anywhere
  const breakAll = [...document.querySelectorAll('body *')].filter(el => getComputedStyle(el).wordBreak === 'break-all')
    .map(el => el.tagName + '.' + el.className);
  // 4. charts without spread: the data marks (direct children of the axes: lines, dots, bars, bands; full-span
  //    reference lines left out) must span 10% of the axes both ways, and several lines must not be one line twice
  const flat = [];
  for (const fig of document.querySelectorAll('figure.chart')) {
    const axes = fig.querySelector('svg g[id$="-axes_1"]');
    if (!axes) { flat.push(fig.dataset.chart + ': no axes'); continue; }
    const box = axes.querySelector('g[id$="-patch_2"]').getBoundingClientRect();
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    const paths = [];
    for (const g of axes.children) {
      if (!/(line2d|LineCollection|PolyCollection|FillBetween)/.test(g.id)) continue;
      const r = g.getBoundingClientRect();
      const fullSpan = (r.width < 1 && r.height > 0.95 * box.height) || (r.height < 1 && r.width > 0.95 * box.width);
      if (fullSpan) continue;
      x0 = Math.min(x0, r.left); x1 = Math.max(x1, r.right); y0 = Math.min(y0, r.top); y1 = Math.max(y1, r.bottom);
      const p = g.querySelector(':scope > path');  // the line itself (markers are <use> of a shared path)
      if (/line2d/.test(g.id) && p) paths.push(p.getAttribute('d'));
    }
    const w = (x1 - x0) / box.width, h = (y1 - y0) / box.height;
    if (!(w >= 0.1 && h >= 0.1)) flat.push(fig.dataset.chart + ': data spans ' + w.toFixed(2) + ' x ' + h.toFixed(2));
    if (paths.length > 1 && new Set(paths).size === 1) flat.push(fig.dataset.chart + ': identical lines');
  }
  return {small, wide, breakAll, flat, pageWidth: document.documentElement.scrollWidth};
})()"""

SAME_REPLY = """(() => {
  const sorted = v => Array.isArray(v) ? v.map(sorted) : (v && typeof v === 'object')
    ? Object.fromEntries(Object.keys(v).sort().map(k => [k, sorted(v[k])])) : v;
  const canon = t => { try { return JSON.stringify(sorted(JSON.parse(t))); }
                       catch (e) { return t.trim().split(/\\s+/).join(' '); } };
  return [...document.querySelectorAll('#disagreements tbody tr')].map(tr => {
    const ref = tr.querySelector('td[data-label="Reference reply"] pre').textContent;
    const cand = tr.querySelector('td[data-label="Candidate reply"] pre').textContent;
    return {id: tr.querySelector('b').textContent, same: canon(ref) === canon(cand)};
  });
})()"""


@pytest.mark.parametrize("which", ["fixture", "identical", "six", "real-run", "dashboard", "tiny-dashboard"])
def test_readable_at_laptop_and_phone_width(browser: Browser, reports: dict[str, Path], which: str) -> None:
    """At 1280 and 390 px: no text under 10 px (chart text included), nothing wider than the screen outside its
    own scrolling box, no word broken mid-word, and every chart drawn shows a spread."""
    for width in (1280, 390):
        _, _, errors, requests = _load(browser, reports[which], width)
        assert not errors and not requests
        got = browser.evaluate(READER_CHECKS)
        _shot(browser, f"reader-{which}", width)
        assert got["small"] == [], f"text under 10 px at {width} px: {got['small'][:8]}"
        assert got["wide"] == [] and got["pageWidth"] <= width, f"wider than {width} px: {got['wide'][:8]}"
        assert got["breakAll"] == []
        assert got["flat"] == [], f"charts without spread: {got['flat']}"


def test_no_identical_pair_is_listed_as_a_disagreement(browser: Browser, reports: dict[str, Path]) -> None:
    for width in (1280, 390):
        _load(browser, reports["identical"], width)
        rows = browser.evaluate(SAME_REPLY)
        assert not {r["id"] for r in rows} & {"tc-same-1", "tc-same-2"}
        assert rows and not [r for r in rows if r["same"]], rows
        note = browser.evaluate("document.getElementById('identical-dropped').textContent")
        assert note.startswith("4 flagged cases where the candidate's reply is identical")


def test_detectors_catch_charts_without_spread_and_small_text(browser: Browser, tmp_path: Path) -> None:
    """Negative control for the checks above: the old charts (rates bunched at 1.0 on a 0-1 axis, identical
    lines, a 7-inch figure shrunk to a phone) are caught."""
    from reports import charts
    from verifier.records import Interval
    from verifier.run.summary import Series

    bunched = charts.rates_chart([("schema_accuracy", e, Interval(value=0.995, low=0.99, high=1.0, n=900))
                                  for e in ("ref", "cand")], "bunched")
    line = Series(name="cache", x=[1.0, 2.0, 3.0, 4.0, 5.0], y=[0.1, 0.5, 0.6, 0.7, 0.9])
    same = charts.series_chart("cache", {"ref": line, "cand": line}, "same")
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><meta name=viewport content='width=device-width'><body>"
                    + "".join(f'<figure class="chart" data-chart="{k}">{svg}</figure>'
                              for k, svg in (("bunched", bunched), ("same", same)))
                    + '<svg width="700" viewBox="0 0 700 100" style="max-width:100%"><text x="0" y="50" '
                      'style="font-size:9px">tiny</text></svg><p style="word-break:break-all">verifier-tiny</p>',
                    encoding="utf-8")
    _load(browser, page, 390)
    got = browser.evaluate(READER_CHECKS)
    assert any(f.startswith("bunched: data spans") for f in got["flat"]), got["flat"]
    assert "same: identical lines" in got["flat"], got["flat"]
    assert any(s.startswith("svg:tiny") for s in got["small"]), got["small"]
    assert got["breakAll"] == ["P."]


DASH_FIGURES = """(() => [...document.querySelectorAll('section.endpoint')].flatMap(sec =>
  [...sec.querySelectorAll('tr[data-run] td[data-metric]')].map(td => ({
    endpoint: sec.dataset.endpoint, run: td.closest('tr').dataset.run, metric: td.dataset.metric,
    text: td.textContent.trim()}))))()"""


def test_dashboard_figures_equal_the_summaries(browser: Browser, reports: dict[str, Path],
                                               tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every figure the dashboard shows equals the indexed summary's to 4 significant digits, 6.665e-13 included."""
    import re

    from verifier.history.gate import metric_info

    _, summaries = tiny_history(tmp_path_factory.mktemp("tiny-again"))  # the same seeded summaries, rebuilt
    want = {(s.run_id, r.endpoint, m): iv for s in summaries for r in s.results for m, iv in r.metrics.items()}
    for width in (1280, 390):
        _load(browser, reports["tiny-dashboard"], width)
        cells = [c for c in browser.evaluate(DASH_FIGURES) if c["text"] not in ("–", "")]
        assert len(cells) >= 4 * 5, cells
        tiny = 0
        for c in cells:
            iv = want[(c["run"], c["endpoint"], c["metric"])]
            m = re.fullmatch(r"(\S+?)%? \[(\S+), (\S+)\] n=(\d+)", c["text"])
            assert m, c
            scale = 100.0 if metric_info(c["metric"]).unit == "%" else 1.0
            for shown, real in zip(m.groups()[:3], (iv.value, iv.low, iv.high)):
                assert f"{float(shown):.4g}" == f"{scale * real:.4g}", (c, iv)
            assert int(m.group(4)) == iv.n
            tiny += iv.value is not None and 0 < iv.value < 1e-11
        assert tiny == 4  # fp8-kv's mean KL in every run, never shown as 0
