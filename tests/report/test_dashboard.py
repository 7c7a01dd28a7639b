"""``verifier history dashboard`` on a generated history of 200 nights: trends, drift marks, verdicts, links, size."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.report.fixtures import build_history

RUNS, SHIFT = 200, 185


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    from verifier.cli import app

    root = tmp_path_factory.mktemp("dash")
    db = build_history(root, RUNS, shift_at=SHIFT)
    out = root / "site" / "dashboard.html"
    res = CliRunner().invoke(app, ["history", "dashboard", "--db", str(db), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return root, out, out.read_text(encoding="utf-8")


def _section(html: str, endpoint: str) -> str:
    return re.search(rf'<section id="ep-\d+" class="endpoint" data-endpoint="{re.escape(endpoint)}">(.*?)</section>',
                     html, re.S).group(1)


@pytest.mark.slow
def test_every_run_every_endpoint_listed_and_small(page) -> None:
    _, out, html = page
    assert out.stat().st_size < 5_000_000
    assert f"{RUNS} runs from" in html
    for ep in ("ref", "fp8-kv", "int4-decode"):
        assert len(re.findall(r'<tr data-run="night-\d+">', _section(html, ep))) == RUNS
    # one shared-axis trend per metric and suite, every endpoint on it (not one panel per endpoint)
    charts = re.findall(r'<figure class="chart" data-chart="[^"]+" data-metric="([^"]+)"><figcaption><b>([^<]+)</b>',
                        html)
    assert html.count("<svg ") == len(charts) == 3
    assert ("schema_accuracy", "Schema accuracy · toolcall-core: difference from the reference over time") in charts
    assert {m for m, _ in charts} == {"schema_accuracy", "trigger_f1", "kl_mean"}
    assert "drift flagged in" in _section(html, "int4-decode") and "of the" in _section(html, "int4-decode")


@pytest.mark.slow
def test_the_shift_is_marked_as_drift(page) -> None:
    """int4-decode's schema accuracy drops 17 points from night 185: the drift test flags it, on the right nights."""
    _, _, html = page
    int4 = _section(html, "int4-decode")
    flagged = {int(m) for m in re.findall(
        r'<tr data-run="night-(\d+)">(?:(?!</tr>).)*?<span class="mark fail" title="[^"]*toolcall-core/schema_accuracy',
        int4, re.S)}
    assert SHIFT in flagged  # the first night after the change (its history is still the old level)
    assert not {n for n in flagged if n < SHIFT - 1}, "flags before the change: false alarms on schema accuracy"
    before = {int(m) for m in re.findall(r'<tr data-run="night-(\d+)">(?:(?!</tr>).)*?class="mark fail"',
                                         _section(html, "fp8-kv"), re.S)}
    assert len(before) <= 0.05 * RUNS  # an unchanged endpoint: false alarms within the drift test's alpha


@pytest.mark.slow
def test_known_folders_link_reports_and_show_verdicts(page) -> None:
    root, out, html = page
    links = re.findall(r'<a href="([^"#][^"]*)">(night-\d+)</a>', _section(html, "int4-decode"))
    assert [r for _, r in links] == [f"night-{i:04d}" for i in (RUNS - 1, RUNS - 2, RUNS - 3)]
    for href, run in links:
        assert (out.parent / href).resolve() == (root / "runs" / run / "report.html").resolve()
    latest = re.search(r'<tr data-run="night-0199">(.*?)</tr>', _section(html, "int4-decode"), re.S).group(1)
    assert '<span class="vmark differs">' in latest and "<td>int4-decode</td>" in latest
    older = re.search(r'<tr data-run="night-0100">(.*?)</tr>', _section(html, "int4-decode"), re.S).group(1)
    assert "vmark" not in older and "href" not in older  # no folder known: no verdict, no link, and nothing invented


def test_missing_database_is_one_line_error(tmp_path: Path) -> None:
    from verifier.cli import app

    res = CliRunner().invoke(app, ["history", "dashboard", "--db", str(tmp_path / "none.sqlite"),
                                   "--out", str(tmp_path / "d.html")])
    assert res.exit_code == 2
    assert res.output.strip() == f"error: {tmp_path / 'none.sqlite'}: no history database here"
    assert not (tmp_path / "d.html").exists()


HOSTILE_FOLDERS = ["javascript:alert(1)", "data:text,x", "a b#frag?q=1%41", "..%2Fup", "night"]


@pytest.mark.slow
def test_links_from_hostile_folder_names_are_relative_encoded_and_lead_to_the_report(tmp_path: Path) -> None:
    """A run folder's name is data: its link is ``./``-prefixed and percent-encoded, never a scheme (issue 39)."""
    from html.parser import HTMLParser
    from urllib.parse import unquote, urlsplit

    from reports.render import render_report
    from tests.report.fixtures import make_summary, write_run
    from verifier.cli import app
    from verifier.history import index_summary

    db = tmp_path / "h.sqlite"
    runs = tmp_path / "runs"
    runs.mkdir()
    for i, name in enumerate(HOSTILE_FOLDERS):
        s, recs = make_summary(run_id=f"r{i}", started_at=f"2026-01-0{i + 1}T02:00:00Z", seed=i)
        folder = runs / name
        render_report(write_run(folder, s, recs))
        index_summary(s, db, run_dir=folder)
    out = tmp_path / "site" / "dashboard.html"
    res = CliRunner().invoke(app, ["history", "dashboard", "--db", str(db), "--out", str(out)])
    assert res.exit_code == 0, res.output

    class Hrefs(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.hrefs: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.hrefs += [v or "" for k, v in attrs if k == "href" and tag == "a"]

    parser = Hrefs()
    parser.feed(out.read_text(encoding="utf-8"))
    reports = [h for h in parser.hrefs if not h.startswith("#")]
    assert len(reports) == len(HOSTILE_FOLDERS) * 3  # each run, once per endpoint
    targets = set()
    for href in reports:
        parts = urlsplit(href)
        assert href.startswith("./") and parts.scheme == "" and parts.netloc == "", href
        assert parts.query == "" and parts.fragment == "", href  # '#' and '?' in a name are encoded
        target = (out.parent / unquote(parts.path)).resolve()
        assert target.name == "report.html" and target.is_file(), href
        targets.add(target.parent.name)
    assert targets == set(HOSTILE_FOLDERS)


def test_few_runs_say_drift_was_not_tested_and_cost_is_drawn(tmp_path: Path) -> None:
    """Three runs on one day: drift needs 6 (5 before), so it is 'not tested', never 'flagged in 0'; ticks carry the
    time; a cost block in summary.json is drawn per run."""
    import json

    from reports.dashboard import render_dashboard
    from reports.dashboard_trends import tick_labels

    db = build_history(tmp_path, 3, folders=3)
    for i, folder in enumerate(sorted((tmp_path / "runs").iterdir())):
        data = json.loads((folder / "summary.json").read_text())
        data["cost"] = {"ref": {"usd": 0.5 + i}, "fp8-kv": {"usd": 0.25 * (i + 1)}}
        (folder / "summary.json").write_text(json.dumps(data))
    html = render_dashboard(db, tmp_path / "d.html").read_text()
    assert "drift not tested (needs 6 runs, has 3)" in html and "flagged in 0" not in html
    assert 'data-chart="cost"' in html and "Cost per run" in html
    assert tick_labels(["2026-01-01T02:00:00Z", "2026-01-01T14:30:00Z"]) == ["2026-01-01\n02:00",
                                                                            "2026-01-01\n14:30"]
    assert tick_labels(["2026-01-01T02:00:00Z", "2026-01-02T02:00:00Z"]) == ["2026-01-01", "2026-01-02"]
