"""The HTML report from a run folder: self-contained, escaped, honest about what was not measured."""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports.render import VERDICT_COLUMNS, render_report
from tests.report.fixtures import HOSTILE_REPLY, make_summary, run_after_nights, write_run
from verifier.records import Interval
from verifier.run.summary import Disagreement, RunSummary, Series


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


def _verdict_table(html: str) -> str:
    table = re.search(r'<table class="verdict" id="verdict-table">(.*?)</table>', html, re.S)
    assert table, "verdict table missing"
    return table.group(1)


@pytest.mark.slow
def test_headlines_come_first_one_line_per_endpoint(rendered) -> None:
    run, html, _ = rendered
    body = html[html.index("<body>"):]
    assert body.index('id="headlines"') < body.index("<table"), "a table comes before the headlines"
    lines = re.findall(r'<li class="headline (\w+)" data-endpoint="([^"]+)" data-status="\w+">'
                       r'<span class="vmark \w+">([^<]+)</span> <span class="htext">([^<]+)</span>', html)
    assert [(s, e) for s, e, _, _ in lines][0] == ("reference", "ref")
    from reports.render import VERDICT_MARKS
    from verifier.run.verdict import compute_verdicts

    summary, _ = make_summary()
    verdicts = compute_verdicts(summary)
    assert {e: (s, m, html_lib.unescape(t)) for s, e, m, t in lines[1:]} == {
        e: (v.status, VERDICT_MARKS[v.status], v.headline) for e, v in verdicts.items()}
    assert verdicts["int4-decode"].status == "differs"  # schema accuracy 0.90 against 0.99 on 120 paired cases


def test_verdict_table_is_pivoted_one_column_per_endpoint(rendered) -> None:
    _, html, _ = rendered
    body = _verdict_table(html)
    heads = re.findall(r'<th class="(?:reference|candidate)" data-endpoint="([^"]+)"', body)
    assert heads == ["ref", "fp8-kv", "int4-decode"]
    metric_rows = re.findall(r'<tr data-metric="([^"]+)">', body)
    # no endpoint measures forced calls or cache hits here: one line under the table, no rows of "not measured"
    assert metric_rows == [k for k, _ in VERDICT_COLUMNS if k not in ("forced_call_success", "cache_hit_rate")]
    assert "Not measured for any endpoint in this run: Forced-call success, Cache hit rate." in html
    int4 = re.search(r'<tr data-metric="schema_accuracy">(.*?)</tr>', body, re.S).group(1)
    cells = re.findall(r"<td.*?</td>", int4, re.S)
    # one judge per figure: the default policy judges by the verdict, so no absolute mark sits beside a figure
    assert len(cells) == 3 and 'class="mark' not in int4
    verdict_row = re.search(r'<tr class="vrow">(.*?)</tr>', body, re.S).group(1)
    assert "yardstick" in verdict_row and verdict_row.count('class="vmark') == 2


def test_every_rate_shows_ci_and_n(rendered) -> None:
    _, html, _ = rendered
    figs = re.findall(r'<span class="fig"[^>]*>[^<]*%', html)
    cis = re.findall(r'<span class="n">n=\d+</span>', html)
    assert figs and len(cis) >= len(figs)


def test_metric_names_link_to_the_glossary(rendered) -> None:
    _, html, p = rendered
    targets = {a["id"] for _, a in p.tags if a.get("id")}
    links = [a["href"][1:] for t, a in p.tags if t == "a" and a.get("href", "").startswith("#g-")]
    assert len(links) >= 10 and set(links) <= targets
    assert "#g-trigger_f1" in html and '<dt id="g-trigger_f1">' in html


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
    # toolcall: differences from the reference (int4's schema accuracy moved) + latency (medians 22% apart);
    # agent: survival + validity by step (no paired comparison there); logprob: KL CDF. No 0-1 rates chart.
    assert set(ids) == {"s0-diff", "s0-latency", "s1-series0", "s1-series1", "s2-series0"}
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
    assert card["verdict"] == "inconclusive" and card["verdict_headline"].startswith("fp8-kv vs ref is inconclusive: ")
    assert json.loads((run / "disclosure-ref.json").read_text())["verdict"] is None
    for path in [*cards, run / "report.html"]:
        assert "SECRET123" not in path.read_text(), f"credential from the URL leaked into {path.name}"


@pytest.mark.slow
def test_history_section_with_db(tmp_path: Path) -> None:
    run, db = run_after_nights(tmp_path, 4)
    html = render_report(run, db_path=db).read_text()
    assert 'id="history"' in html
    assert re.search(r'data-chart="hist\d+-\d+"', html)
    assert "comparable runs in history" in html  # 4 runs < min_history 5: stated as untested, not silently skipped


def test_bad_summary_is_one_clear_line(tmp_path: Path) -> None:
    from verifier.run.summary import SummaryFileError

    (tmp_path / "summary.json").write_text('{"run_id": 5}')
    with pytest.raises(SummaryFileError, match=r"summary\.json: field run_id: "):
        render_report(tmp_path)


def test_run_with_no_results_renders_not_measured(tmp_path: Path) -> None:
    summary, _ = make_summary()
    summary.results = []
    html = render_report(write_run(tmp_path / "empty", summary)).read_text()
    table = _verdict_table(html)
    assert "<tr data-metric=" not in table  # no row of nothing but "not measured"
    assert "Not measured for any endpoint in this run: " + ", ".join(h for _, h in VERDICT_COLUMNS) in html
    assert "no headline metric was measured" in html
    assert "No results were scored for this suite." in html
    assert "No disagreements (different outcomes) were recorded" in html


def _zero_family_and_flat_series(summary: RunSummary) -> RunSummary:
    for r in summary.results:
        if r.kind == "logprob" and not r.is_reference:
            r.metrics.update({f"forced_kl_p{q}": Interval(value=0.0, low=0.0, high=0.0, n=400) for q in (50, 90, 99)})
            r.metrics["forced_same_top"] = Interval(value=1.0, low=0.99, high=1.0, n=400)
        if r.kind == "agent":
            r.series.append(Series(name="task_success_by_horizon", x=[10.0], y=[1.0], x_label="horizon"))
    return summary


@pytest.mark.slow
def test_zero_families_collapse_and_flat_charts_become_sentences(tmp_path: Path) -> None:
    summary, records = make_summary()
    html = render_report(write_run(tmp_path / "z", _zero_family_and_flat_series(summary), records)).read_text()
    assert "forced_kl_p50" not in re.sub(r'title="[^"]*"', "", html)  # no table row for the family...
    assert re.search(r'data-family="forced"[^>]*>4 forced_\* metrics: zero \(same top token 100%\) or not measured '
                     r"for every endpoint\.</p>", html)  # ...one line that says so
    assert ("task success by horizon: ref, fp8-kv, int4-decode: 1 at horizon 10 "
            "(the same for every endpoint: no chart)") in html
    assert html.count("<svg ") == len(re.findall(r'data-chart="', html))
    assert "task_success_by_horizon" not in re.findall(r'data-chart="([^"]+)"', html)


def _many_disagreements(summary: RunSummary, per_endpoint: int) -> RunSummary:
    for r in summary.results:
        if r.kind == "toolcall" and not r.is_reference:
            r.disagreements = [Disagreement(case_id=f"tc-{i:04d}", kind="schema", reference='{"city": "Oslo"}' * 8,
                                            candidate=HOSTILE_REPLY * 3, request_excerpt="x" * 400, detail="d")
                               for i in range(per_endpoint)]
    return summary


@pytest.mark.slow
def test_disagreements_capped_per_suite_with_counts(tmp_path: Path) -> None:
    from reports.render import MAX_DISAGREEMENTS

    summary, records = make_summary()
    html = render_report(write_run(tmp_path / "d", _many_disagreements(summary, 250), records)).read_text()
    shown = re.findall(r'<tr data-endpoint="([^"]+)" data-suite="toolcall-core"', html)
    assert len(shown) == 2 * MAX_DISAGREEMENTS
    assert f"fp8-kv 250 ({MAX_DISAGREEMENTS} shown), int4-decode 250 ({MAX_DISAGREEMENTS} shown)" in html
    assert """records.jsonl: <code>jq -c 'select(.suite == "toolcall-core" and .endpoint == "ENDPOINT")'""" in html


@pytest.mark.slow
def test_two_thousand_case_report_stays_small(tmp_path: Path) -> None:
    """A 2,000-case run with 600 disagreements per candidate and 6,000 latency records: under 3 MB."""
    summary, records = make_summary(n=2000)
    out = render_report(write_run(tmp_path / "big", _many_disagreements(summary, 600), records))
    size = out.stat().st_size
    assert size < 3_000_000, f"report is {size / 1e6:.2f} MB"


def test_absolute_thresholds_only_from_a_policy_file_and_labelled(tmp_path: Path) -> None:
    from verifier.history.gate import parse_policy

    summary, records = make_summary()
    run = write_run(tmp_path / "abs", summary, records)
    policy = parse_policy({"thresholds": {"schema_accuracy": 0.95}}, "team-policy.toml")
    html = render_report(run, policy=policy).read_text()
    int4 = re.search(r'<tr data-metric="schema_accuracy">(.*?)</tr>', _verdict_table(html), re.S).group(1)
    assert re.search(r'<span class="mark fail" title="absolute threshold schema_accuracy &gt;= 0.95[^"]*">abs\. fail',
                     int4)
    assert "policy file team-policy.toml: absolute thresholds schema_accuracy &gt;= 0.95" in html
    assert "Rule point: an absolute threshold is judged by the figure&#39;s point estimate" in html


def _identical_pairs(summary: RunSummary) -> RunSummary:
    """Both endpoints fail the schema the same way on two cases: the scoring flags them, the replies are the same."""
    same = '{"name": "get_weather", "arguments": {"town": "Oslo"}}'
    for r in summary.results:
        if r.kind == "toolcall" and not r.is_reference:
            r.disagreements = [
                Disagreement(case_id="tc-same-1", kind="schema", reference=same, candidate=same, detail="same"),
                Disagreement(case_id="tc-same-2", kind="schema", reference='{"a": 1, "b": 2}',
                             candidate='{"b": 2,  "a": 1}', detail="same by value"),
                *r.disagreements,
            ]
    return summary


def test_identical_replies_are_never_disagreements(tmp_path: Path) -> None:
    summary, records = make_summary()
    real = {r.endpoint: len(r.disagreements) for r in summary.results if r.kind == "toolcall"}
    html = render_report(write_run(tmp_path / "same", _identical_pairs(summary), records)).read_text()
    assert "tc-same-1" not in html and "tc-same-2" not in html
    assert f"fp8-kv {real['fp8-kv']}, int4-decode {real['int4-decode']}." in html
    assert "Not counted: 4 cases the scoring flagged where both replies are identical" in html
    first = re.search(r'<table class="dis">.*?<tr data-endpoint="[^"]+" data-suite="[^"]+" data-kind="[^"]+">\s*'
                      r'<td><b>([^<]+)</b>', html, re.S)
    assert first and first.group(1) != "tc-same-1"


def test_small_things_read_as_words(rendered) -> None:
    """No Python repr, no path to docs a reader lacks, pass^1 not beside task success, notes once, units on
    differences, test names in words."""
    _, html, _ = rendered
    text = re.sub(r"<svg.*?</svg>", "", html, flags=re.S)
    assert "'decode_weights'" not in text and "None" not in re.sub(r"<script>.*?</script>", "", text, flags=re.S)
    assert "decode_weights = int4" in text
    assert "docs/verdict.md" not in text and "How the verdict is decided" in text
    assert 'data-metric="pass^1"' not in text
    assert "McNemar&#39;s test on paired cases" in text and ">mcnemar<" not in text
    assert re.search(r'<td class="num">[+-]\d+\.\d pts</td>', text)


@pytest.mark.slow
def test_notes_shown_once_with_their_endpoints(tmp_path: Path) -> None:
    summary, records = make_summary()
    for r in summary.results:
        if r.kind == "logprob":
            r.notes = ["kl_* figures: decode path", "only mine"] if r.endpoint == "fp8-kv" else [
                "kl_* figures: decode path"]
    html = render_report(write_run(tmp_path / "notes", summary, records)).read_text()
    assert html.count("kl_* figures: decode path") == 1
    assert "<b>ref, fp8-kv, int4-decode</b>: kl_* figures: decode path" in html
    assert "<b>fp8-kv</b>: only mine" in html


def test_verifier_run_prints_the_gate_outcome_under_the_default_policy(tmp_path: Path) -> None:
    """The line `verifier run` prints: the gate judged by each candidate's verdict, nothing absolute."""
    from verifier.cli.compose import gate_outcome

    summary, records = make_summary()
    line = gate_outcome(write_run(tmp_path / "g", summary, records))
    assert line == ("gate: fail under <default policy>, judged by each candidate's verdict (fp8-kv verdict warn; "
                    "int4-decode verdict fail); drift not tested (no history database)")
