"""The HTML report from a run folder: self-contained, escaped, honest about what was not measured."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports.render import VERDICT_COLUMNS, render_report
from tests.report.fixtures import HOSTILE_REPLY, make_summary, write_run
from verifier.history import index_summary


class _Collect(HTMLParser):
    """Collects tags/attributes and script bodies with the standard library's HTML tokenizer."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, _Collect]:
    summary, records = make_summary()
    run = write_run(tmp_path_factory.mktemp("run"), summary, records)
    out = render_report(run)
    html = out.read_text(encoding="utf-8")
    p = _Collect()
    p.feed(html)
    return run, html, p


def test_verdict_table_has_one_row_per_endpoint_and_every_column(rendered) -> None:
    _, html, p = rendered
    table = re.search(r'<table class="verdict" id="verdict-table">(.*?)</table>', html, re.S)
    assert table, "verdict table missing"
    body = table.group(1)
    assert len(re.findall(r"<tr class=\"(reference|candidate)\"", body)) == 3
    for _, head in VERDICT_COLUMNS:
        assert f"<th>{head}</th>" in body
    # a failing candidate is marked fail (int4-decode: schema accuracy ~0.83 < 0.95)
    int4 = re.search(r'data-endpoint="int4-decode">(.*?)</tr>', body, re.S).group(1)
    assert '<span class="mark fail">fail</span>' in int4


def test_absent_metric_is_not_measured_never_zero(rendered) -> None:
    _, html, _ = rendered
    table = re.search(r'id="verdict-table">(.*?)</table>', html, re.S).group(1)
    rows = re.findall(r"<tr class=\"(?:reference|candidate)\".*?</tr>", table, re.S)
    cache_col = [h for _, h in VERDICT_COLUMNS].index("Cache hit rate") + 2  # endpoint + gate columns first
    for row in rows:
        cells = re.findall(r"<td.*?</td>", row, re.S)
        assert "not measured" in cells[cache_col]
        assert "0.0%" not in cells[cache_col]


def test_every_rate_shows_ci_and_n(rendered) -> None:
    _, html, _ = rendered
    figs = re.findall(r'<span class="fig">[^<]*%', html)
    cis = re.findall(r'<span class="n">n=\d+</span>', html)
    assert figs and len(cis) >= len(figs)


def test_model_output_is_escaped_text(rendered) -> None:
    _, html, p = rendered
    assert "window.__pwned" in html  # the text is shown...
    assert "<script>window.__pwned" not in html  # ...but never as markup
    assert "&lt;script&gt;window.__pwned = 1" in html
    assert not any(t == "img" for t, _ in p.tags), "an <img> tag made it into the report"
    assert not any(k.startswith("on") for _, attrs in p.tags for k in attrs), "inline event handler in the report"
    assert len(p.scripts) == 1 and "__pwned" not in p.scripts[0]
    assert HOSTILE_REPLY not in html


def test_self_contained_no_external_reference(rendered) -> None:
    _, html, p = rendered
    for tag, attrs in p.tags:
        for key in ("src", "href", "action", "data", "poster", "srcset"):
            val = attrs.get(key)
            if val is not None:
                assert val.startswith("#"), f"<{tag} {key}={val!r}> points outside the document"
        if tag == "link":
            pytest.fail("external <link> in report")
    assert "@import" not in html
    # the only URLs left in the file are XML namespace names (identifiers, never fetched) and the endpoints'
    # own (redacted) addresses shown as text
    urls = set(re.findall(r"(?:https?|wss?|ftp)://[^\s\"'<>)]+", html))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink",
                    "http://127.0.0.1:9/v1?api_key=REDACTED"}, urls
    assert not re.search(r"url\((?!#)", html), "CSS url() to something other than an in-document id"


def test_csp_allows_exactly_our_script(rendered) -> None:
    _, html, p = rendered
    csp = next(a["content"] for t, a in p.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp and "connect-src" not in csp
    digest = base64.b64encode(hashlib.sha256(p.scripts[0].encode()).digest()).decode()
    assert f"'sha256-{digest}'" in csp


def test_charts_per_suite(rendered) -> None:
    _, html, _ = rendered
    ids = re.findall(r'data-chart="([^"]+)"', html)
    # toolcall: rates + latency; agent: rates + survival + validity-by-step; logprob: rates + KL CDF
    assert {"s0-rates", "s0-latency", "s1-rates", "s1-series0", "s1-series1", "s2-series0"} <= set(ids)
    assert html.count("<svg ") == len(ids)
    assert "mathdefault" not in html  # tick labels are plain text, not unparsed TeX


def test_disclosure_cards_written_without_secrets(rendered) -> None:
    run, html, _ = rendered
    cards = sorted(run.glob("disclosure-*.json"))
    assert [c.name for c in cards] == ["disclosure-fp8-kv.json", "disclosure-int4-decode.json", "disclosure-ref.json"]
    card = json.loads((run / "disclosure-fp8-kv.json").read_text())
    assert card["measured_against"]["name"] == "ref"
    assert {s["content_hash"] for s in card["suites"]} == {"a" * 64, "b" * 64, "c" * 64}
    assert card["fingerprint"]["logprob-core"]["verdict"] == "fp8-kv"
    assert "closest profile: fp8-kv (distance 0.012)" in html
    assert "cache_hit_rate" in card["not_measured"]
    assert card["endpoint"]["api_key_env"] == "PROVIDER_KEY"
    for path in [*cards, run / "report.html"]:
        assert "SECRET123" not in path.read_text(), f"credential from the URL leaked into {path.name}"


def test_history_section_with_db(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    for night in range(4):
        s, _ = make_summary(run_id=f"n{night}", started_at=f"2026-01-0{night + 1}T02:00:00Z", seed=night)
        index_summary(s, db)
    s, r = make_summary(run_id="tonight", started_at="2026-01-09T02:00:00Z", seed=9)
    run = write_run(tmp_path / "run", s, r)
    html = render_report(run, db_path=db).read_text()
    assert 'id="history"' in html
    assert re.search(r'data-chart="hist\d+-\d+"', html)
    assert "comparable runs in history" in html  # 4 runs < min_history 5: stated as untested, not silently skipped


def test_bad_summary_is_one_clear_line(tmp_path: Path) -> None:
    from verifier.history import HistoryError

    (tmp_path / "summary.json").write_text('{"run_id": 5}')
    with pytest.raises(HistoryError, match=r"summary\.json: field "):
        render_report(tmp_path)


def test_run_with_no_results_renders_not_measured(tmp_path: Path) -> None:
    summary, _ = make_summary()
    summary.results = []
    html = render_report(write_run(tmp_path / "empty", summary)).read_text()
    table = re.search(r'id="verdict-table">(.*?)</table>', html, re.S).group(1)
    assert table.count("not measured") == 3 * len(VERDICT_COLUMNS)
    assert "No results were scored for this suite." in html
    assert "No disagreements were recorded" in html
