"""Cases used and cost beside each verdict (issue 40), from real runs on loopback: a ``--sequential`` run planned by
``--dry-run`` in the same folder, and a run a budget stopped. The report is rendered by the run itself and read
back as text; the CLI's last lines are checked beside it."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.run.forced_weather import forced_weather_suite as _suite
from verifier.cli import app
from verifier.run.summary import RunSummary
from verifier.run.verdict import compute_verdicts
from verifier.testing import FaultInjector, Reply, schema_responder
from verifier.testing.replies import RequestContext

PRICE = "price = { input = 0.60, output = 2.50, cached_input = 0.15 }"


def _config(tmp_path: Path, urls: dict[str, str], budget: dict[str, float] | None = None) -> Path:
    lines = []
    for name, url in urls.items():
        lines += [f"[endpoints.{name}]", f'base_url = "{url}"', PRICE]
        if budget and name in budget:
            lines.append(f"budget = {budget[name]}")
    p = tmp_path / "endpoints.toml"
    p.write_text("\n".join(lines) + "\n")
    return p


class _Headlines(HTMLParser):
    """The text of each ``li.headline`` of the report, by its ``data-endpoint``."""

    def __init__(self) -> None:
        super().__init__()
        self.text: dict[str, str] = {}
        self._ep: str | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "li" and self._ep is None and "headline" in (a.get("class") or "").split():
            self._ep, self._depth = a.get("data-endpoint"), 0
            self.text[self._ep or ""] = ""
        elif tag == "li" and self._ep is not None:
            self._depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "li" and self._ep is not None:
            if self._depth == 0:
                self._ep = None
            else:
                self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._ep is not None:
            self.text[self._ep] += data


def _headlines(run_dir: Path) -> dict[str, str]:
    p = _Headlines()
    p.feed((run_dir / "report.html").read_text())
    return {k: re.sub(r"\s+", " ", v) for k, v in p.text.items()}


@pytest.fixture
def sequential_run(tmp_path: Path, scripted_server) -> tuple[Path, str]:
    ref, twin = scripted_server(schema_responder), scripted_server(schema_responder)
    bad = scripted_server(FaultInjector(schema_responder, {"schema_violation": 0.5}, seed=5))
    cfg = _config(tmp_path, {"ref": ref.base_url, "twin": twin.base_url, "bad": bad.base_url})
    out = tmp_path / "run"
    common = ["--config", str(cfg), "--suite", str(_suite(tmp_path, 300)), "--out", str(out),
              "--no-history", "--seed", "4", "--reference-repeat-share", "1"]
    res = CliRunner().invoke(app, ["run", *common, "--dry-run"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert not (ref.log or twin.log or bad.log) or all(m == "GET" for s in (ref, twin, bad) for m, _, _ in s.log)
    res = CliRunner().invoke(app, ["run", *common, "--sequential", "--look-every", "50"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out, res.output


@pytest.mark.slow
def test_sequential_report_shows_cases_and_cost_beside_each_verdict(sequential_run) -> None:
    out, printed = sequential_run
    s = RunSummary.read(out)
    seq = {q.endpoint: q for q in s.sequential}
    assert seq["bad"].settled and seq["bad"].cases < 300 and seq["bad"].of == 300
    heads = _headlines(out)
    for name in ("bad", "twin"):
        c = s.cost[name]
        assert c.usd is not None and c.usd > 0 and c.plan_usd is not None
        q = seq[name]
        beside = (f"settled after {q.cases:,} of 300 cases, ${c.usd:.4f} of a ${c.plan_usd:.4f} plan "
                  f"({c.requests:,} requests)")
        assert beside in heads[name], heads[name]  # in the candidate's headline block
        assert f"  {name}: {beside}" in printed  # and in the CLI's final lines, under its verdict
        assert c.requests < 300 * 1.5  # the stop saved requests: 300 cases are planned, fewer were sent
    assert heads["bad"].index(f"settled after {seq['bad'].cases} of 300 cases, $") > heads["bad"].index(
        "differs from ref")
    assert "This run was sequential" in (out / "report.html").read_text()  # the rule, as applied, in the page
    # trigger F1 and argument agreement are in the sequential set (judged against the reference's floor, every case
    # answered twice here), and no line says a headline was left outside the set; the twin stops only when both
    # are consistent, the bad candidate at its first differs (what is still open then stays open)
    for name in ("bad", "twin"):
        judged = {e.metric: e for e in s.verdicts[name].evidence if e.test == "sequential (anytime-valid)"}
        assert {"trigger_f1", "argument_agreement"} <= set(judged)
        assert "not in the sequential set" not in heads[name]
    twin = {e.metric: e for e in s.verdicts["twin"].evidence if e.test == "sequential (anytime-valid)"}
    assert all(twin[m].status == "consistent" for m in ("trigger_f1", "argument_agreement"))


@pytest.mark.slow
def test_a_sequential_verdict_follows_the_sequential_decisions_without_more_cases_advice(sequential_run) -> None:
    out, _ = sequential_run
    s = RunSummary.read(out)
    for q in s.sequential:
        v = s.verdicts[q.endpoint]
        by_metric = {(e.suite, e.metric): e for e in v.evidence}
        for h in q.headlines:  # every sequential headline's status is its sequential decision
            e = by_metric[(q.suite, h.metric)]
            assert e.status == {"open": "inconclusive"}.get(h.status, h.status)
            assert e.test == "sequential (anytime-valid)" and e.difference.n == h.units
        assert v.cases_to_settle is None and all(e.cases_to_settle is None for e in v.evidence)
        assert "more cases" not in v.headline and "would likely settle" not in v.headline
        for e in v.evidence:  # the rest keep their fixed-n reading, said to be read after an adaptive stop
            if e.test != "sequential (anytime-valid)":
                assert "read after an adaptive stop" in (e.reason or ""), e
    bad = s.verdicts["bad"]
    assert bad.status == "differs" and "settled by the sequential test after 50 of 300 cases" in bad.headline

    # the same summary with the sequential test leaving 'bad' open: the verdict follows it, and gives no advice
    opened = s.model_copy(deep=True)
    q = next(q for q in opened.sequential if q.endpoint == "bad")
    q.settled, q.cases = False, 300
    for h in q.headlines:
        h.status, h.settled_at = "open", None
    v = compute_verdicts(opened)["bad"]
    assert v.status == "inconclusive", v.headline
    assert "open after 300 cases" in v.headline and "more cases" not in v.headline and v.cases_to_settle is None


def test_a_budget_stopped_run_says_so_beside_the_verdict(tmp_path: Path, scripted_server) -> None:
    def billed(body: dict, ctx: RequestContext) -> Reply:
        reply = schema_responder(body, ctx)
        reply.usage = {"prompt_tokens": 2000, "completion_tokens": int(body.get("max_tokens") or 64),
                       "total_tokens": 2000 + int(body.get("max_tokens") or 64)}
        return reply

    ref, cand = scripted_server(billed), scripted_server(billed)
    out = tmp_path / "run"
    cfg = _config(tmp_path, {"ref": ref.base_url, "cand": cand.base_url}, budget={"cand": 0.05})
    res = CliRunner().invoke(app, ["run", "--config", str(cfg), "--suite",
                                   str(_suite(tmp_path, 40)), "--out", str(out), "--no-history", "-q"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    s = RunSummary.read(out)
    assert s.stopped is not None and s.stopped.reason == "budget"
    sent, refused = s.cost["cand"].requests, s.stopped.endpoints["cand"]["refused"]
    assert 0 < sent < 40 and refused == 40 - sent
    said = f"stopped by budget after {sent} requests ({refused} not sent"
    heads = _headlines(out)
    assert said in heads["cand"], heads["cand"]
    assert "stopped by budget" not in heads["ref"]
    assert f"  cand: ${s.cost['cand'].usd:.4f} ({sent} requests), {said}" in res.output
    assert "This run was sequential" not in (out / "report.html").read_text()
