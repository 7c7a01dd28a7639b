"""Cost before, during and after a run (issue 40): ``--dry-run``, ``summary.json``'s ``cost``, ``--budget``.

Every test runs the real CLI against a real loopback server whose responder reports usage and keeps its own tally
of what it billed, so the figures are checked against the provider's side, not against our own arithmetic.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.kinds.logprob.kind import KL_SAMPLES
from verifier.kinds.toolcall import reference_repeats
from verifier.records import ExchangeRecord
from verifier.run.summary import RunSummary
from verifier.testing import Reply, schema_responder
from verifier.testing.replies import RequestContext
from verifier.testing.scripted_server import stream_events

CORE = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"
PRICE = {"input": 0.60, "output": 2.50, "cached_input": 0.15}


class BillingProvider:
    """A responder that reports usage derived from the request (some prompt tokens cached, some replies without
    usage) and keeps the provider's own bill: tokens and USD of every reply it sent."""

    def __init__(self, *, no_usage_every: int = 0, delay_s: float = 0.0, worst_case: bool = False,
                 break_first_stream: bool = False) -> None:
        self.delay_s = delay_s
        self.break_first_stream = break_first_stream  # first attempt: usage sent, then the stream ends without [DONE]
        self.worst_case = worst_case  # bill every byte of the body as a prompt token and every reply at max_tokens
        self.lock = threading.Lock()
        self.tokens = Counter()
        self.usd = 0.0
        self.no_usage_every = no_usage_every
        self.n = 0

    def __call__(self, body: dict, ctx: RequestContext) -> Reply:
        reply = schema_responder(body, ctx)
        reply.delay_s = self.delay_s  # replies overlap: many reservations are open at once
        size = len(json.dumps(body))
        prompt = size // 3
        cached = (prompt // 2) if int(ctx.body_hash[:2], 16) % 2 else 0
        completion = min(int(body.get("max_tokens") or 64), 5 + int(ctx.body_hash[2:4], 16) % 40)
        if self.worst_case:
            prompt, cached = len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()), 0
            completion = int(body["max_tokens"])
        with self.lock:
            self.n += 1
            if self.no_usage_every and self.n % self.no_usage_every == 0:
                reply.usage = {}
                return reply
            self.tokens.update(prompt=prompt, cached=cached, completion=completion)
            self.usd += ((prompt - cached) * PRICE["input"] + cached * PRICE["cached_input"]
                         + completion * PRICE["output"]) / 1e6
        reply.usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                       "prompt_tokens_details": {"cached_tokens": cached}}
        if self.break_first_stream and ctx.attempt == 1 and body.get("stream"):
            events = stream_events(reply, body, "chatcmpl-broken")  # the usage chunk included, then the cut
            reply.raw_events, reply.truncate_after_chunks = [*events, "{}"], len(events)
        return reply


def _suite(tmp_path: Path, n: int) -> Path:
    p = tmp_path / "mini.jsonl"
    p.write_text("\n".join(CORE.read_text().splitlines()[:n]) + "\n")
    return p


def _config(tmp_path: Path, url: str, *, price: bool = True, budget: float | None = None,
            concurrency: int = 8, tag_bodies: bool = False) -> Path:
    p = tmp_path / "endpoints.toml"
    lines = []
    for name in ("ref", "cand"):
        lines += [f"[endpoints.{name}]", f'base_url = "{url}"', f"concurrency = {concurrency}"]
        if price:
            lines.append("price = { input = 0.60, output = 2.50, cached_input = 0.15 }")
        if tag_bodies:  # each endpoint's bodies differ, so the server counts each one's attempts apart
            lines.append(f'extra_body = {{ user = "{name}" }}')
        if budget is not None and name == "cand":
            lines.append(f"budget = {budget}")
    p.write_text("\n".join(lines) + "\n")
    return p


def invoke(args: list[str]):
    return CliRunner().invoke(app, args, catch_exceptions=False)


def _sent(n_cases: int, repeats: int = 1) -> dict[str, int]:
    """Requests each endpoint sends for an n-case suite: every case per repeat, and the reference answers each case of
    chosen share of the cases once more (``reference_repeats``: default 10 %, at least 50 cases or every case)."""
    again = min(n_cases, max(math.ceil(reference_repeats.DEFAULT_SHARE * n_cases), reference_repeats.MIN_CASES))
    return {"cand": n_cases * repeats, "ref": n_cases * repeats + again}


def _records(out: Path) -> list[ExchangeRecord]:
    return [ExchangeRecord.model_validate_json(x) for x in (out / "records.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_cost_is_reported_usage_times_price_exactly_with_cached_tokens(tmp_path, scripted_server):
    provider = BillingProvider(no_usage_every=7)
    srv = scripted_server(provider)
    out = tmp_path / "run"
    res = invoke(["run", "--config", str(_config(tmp_path, srv.base_url)), "--suite", str(_suite(tmp_path, 20)),
                  "--out", str(out), "--no-history", "-q"])
    assert res.exit_code == 0, res.output
    s = RunSummary.read(out)
    recs = _records(out)
    total = Counter()
    usd = 0.0
    for name, c in s.cost.items():
        total.update(prompt=c.prompt_tokens, cached=c.cached_tokens, completion=c.completion_tokens)
        usd += c.usd or 0.0
        mine = [r for r in recs if r.endpoint == name]
        assert c.requests == len(mine) == _sent(20)[name]
        assert c.with_usage + c.without_usage == c.requests and c.without_usage >= 1
        assert len(c.without_usage_examples) == c.without_usage  # each reply without usage is named
        # the formula, from the records' own usage: ((prompt - cached) x input + cached x cached + completion x out)
        want = sum(((r.usage.prompt_tokens - r.usage.cached_tokens) * 0.60 + r.usage.cached_tokens * 0.15
                    + r.usage.completion_tokens * 2.50) / 1e6 for r in mine if r.usage.prompt_tokens is not None)
        assert c.usd == pytest.approx(want, rel=1e-12, abs=0)
    assert total == provider.tokens  # the provider's own tally of tokens, to the token
    assert usd == pytest.approx(provider.usd, rel=1e-12, abs=0)
    assert provider.tokens["cached"] > 0 and s.endpoints[0].price.cached_input == 0.15
    # the report: a cost row in the verdict table and a cost table in the run details, each with its denominator
    html = (out / "report.html").read_text()
    assert '<tr class="costrow">' in html and f"${s.cost['cand'].usd:.4f}" in html
    assert f"{s.cost['cand'].without_usage} of 20 replies reported no usage" in html


@pytest.mark.slow
def test_a_retried_attempt_that_reported_usage_is_billed(tmp_path, scripted_server):
    """A stream that sent its usage and then broke (no [DONE]) is retried; the provider billed both attempts."""
    provider = BillingProvider(break_first_stream=True)
    srv = scripted_server(provider)
    out = tmp_path / "run"
    res = invoke(["run", "--config", str(_config(tmp_path, srv.base_url, tag_bodies=True)),
                  "--suite", str(_suite(tmp_path, 6)), "--stream", "--out", str(out), "--no-history", "-q",
                  # the reference's second answer repeats its first body, which the server then counts as attempt 3
                  "--reference-repeat-share", "0"])
    assert res.exit_code == 0, res.output
    recs = _records(out)
    assert all(r.ok and r.attempts == 2 and len(r.retried_usage) == 1 for r in recs)
    s = RunSummary.read(out)
    assert all(c.retried_billed == c.requests == 6 and c.with_usage == 6 for c in s.cost.values())
    tokens = Counter()
    for c in s.cost.values():
        tokens.update(prompt=c.prompt_tokens, cached=c.cached_tokens, completion=c.completion_tokens)
    assert tokens == provider.tokens  # both attempts, as billed
    assert sum(c.usd for c in s.cost.values()) == pytest.approx(provider.usd, rel=1e-12)


def test_unknown_price_key_is_one_line_naming_file_and_field(tmp_path):
    p = tmp_path / "e.toml"
    p.write_text('[endpoints.a]\nbase_url = "http://127.0.0.1:9/v1"\nprice = { input = 1, output = 2, cache = 3 }\n')
    res = invoke(["run", "--config", str(p), "--suite", "toolcall-core", "--dry-run", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert "\n" not in line and str(p) in line and "endpoints.a.price.cache" in line


def test_a_budget_on_an_endpoint_without_price_is_refused_before_sending(tmp_path, scripted_server):
    srv = scripted_server(BillingProvider())
    res = invoke(["run", "--config", str(_config(tmp_path, srv.base_url, price=False)), "--budget", "1",
                  "--suite", str(_suite(tmp_path, 3)), "--out", str(tmp_path / "o"), "--no-history", "-q"])
    assert res.exit_code == 2 and "no price" in res.stderr and "'ref'" in res.stderr
    assert srv.request_count == 0


def test_dry_run_sends_nothing_writes_the_plan_and_bounds_the_real_cost(tmp_path, scripted_server):
    provider = BillingProvider()
    srv = scripted_server(provider)
    cfg, suite = _config(tmp_path, srv.base_url), _suite(tmp_path, 15)
    res = invoke(["run", "--config", str(cfg), "--suite", str(suite), "--repeats", "2", "--dry-run",
                  "--out", str(tmp_path / "plan"), "--no-history"])
    assert res.exit_code == 0, res.output
    assert srv.request_count == 0  # not even GET /models
    assert "USD high" in res.output and "estimate: 4 characters a token" in res.output
    plan = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert set(plan) >= {"endpoints", "usd", "usd_high"} and set(plan["endpoints"]) == {"ref", "cand"}
    for name, e in plan["endpoints"].items():
        assert isinstance(e["requests"], int) and e["requests"] == _sent(15, repeats=2)[name]  # with the ref's 2nd
        assert 0 < e["usd"] < e["usd_high"]
    assert plan["usd_high"] == pytest.approx(sum(e["usd_high"] for e in plan["endpoints"].values()))
    out = tmp_path / "run"
    res = invoke(["run", "--config", str(cfg), "--suite", str(suite), "--repeats", "2", "--out", str(out),
                  "--no-history", "-q"])
    assert res.exit_code == 0, res.output
    actual = sum(c.usd for c in RunSummary.read(out).cost.values())
    assert 0 < actual <= plan["usd_high"] and provider.usd <= plan["usd_high"]


@pytest.mark.slow
def test_budget_is_never_exceeded_at_concurrency_32_and_the_stopped_run_resumes_exactly(tmp_path, scripted_server):
    provider = BillingProvider(delay_s=0.05, worst_case=True)
    srv = scripted_server(provider)
    suite = _suite(tmp_path, 60)
    cfg = _config(tmp_path, srv.base_url, concurrency=32)
    total = sum(_sent(60).values())  # 170: 60 each, and 50 second answers by the reference
    budget = 0.08  # about a fifth of what the 170 requests cost when each is billed at its worst case
    out = tmp_path / "run"
    res = invoke(["run", "--config", str(cfg), "--suite", str(suite), "--budget", str(budget), "--out", str(out),
                  "--no-history", "-q"])
    assert res.exit_code == 0, res.output
    s = RunSummary.read(out)
    assert provider.usd <= budget  # what the provider billed, not what we think we spent
    spent = sum(c.usd for c in s.cost.values())
    assert spent == pytest.approx(provider.usd, rel=1e-12) and spent <= budget
    assert s.stopped is not None and s.stopped.reason == "budget" and s.stopped.refused > 0
    recs = _records(out)
    assert 0 < len(recs) < total and len(recs) + s.stopped.refused == total
    assert srv.request_count - 2 == len(recs)  # two GET /models; every chat request sent is recorded
    assert all(r.ok for r in recs) and s.verdicts  # verdicts on what was measured
    assert s.settings["progress"]["exchanges"] == len(recs) and s.settings["progress"]["errors"] == 0
    # resume with a budget that covers the rest: every exchange once, none sent twice, nothing stopped
    sent_before = srv.request_count
    res = invoke(["run", "--resume", str(out), "--config", str(cfg), "--budget", "1", "--no-history", "-q"])
    assert res.exit_code == 0, res.output
    recs = _records(out)
    assert len(recs) == len({r.key() for r in recs}) == total
    assert srv.request_count - sent_before - 2 == total - (sent_before - 2)
    s = RunSummary.read(out)
    assert s.stopped is None and s.settings["budget"] == 1
    assert sum(c.usd for c in s.cost.values()) == pytest.approx(provider.usd, rel=1e-12)


@pytest.mark.slow
def test_dry_run_after_one_indexed_run_is_within_30_percent_of_the_next_runs_cost(tmp_path):
    """Built-in engine (its own tokenizer counts the prompts), small --limit: index one run, plan, run again."""
    cfg = tmp_path / "e.toml"
    cfg.write_text('[endpoints.tiny]\nbase_url = "builtin:tiny"\n'
                   "price = { input = 0.60, output = 2.50, cached_input = 0.15 }\n")
    db = tmp_path / "h.sqlite"
    common = ["--config", str(cfg), "--suite", "toolcall-core", "--limit", "6", "-q"]
    res = invoke(["run", *common, "--out", str(tmp_path / "first"), "--db", str(db)])
    assert res.exit_code == 0, res.output
    second = tmp_path / "second"
    res = invoke(["run", *common, "--dry-run", "--out", str(second), "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "tokenizer verifier-tiny" in res.output and "history: mean of" in res.output
    plan = json.loads((second / "plan.json").read_text())
    # the planned run may use the plan's folder; its summary and report then set the cost beside the plan
    res = invoke(["run", *common, "--out", str(second), "--no-history"])
    assert res.exit_code == 0, res.output
    cost = RunSummary.read(second).cost["tiny"]
    actual = cost.usd
    assert actual > 0 and abs(plan["usd"] - actual) <= 0.30 * actual
    assert plan["usd_high"] >= actual
    assert cost.plan_usd == plan["endpoints"]["tiny"]["usd"]
    assert f"${actual:.4f} of a ${plan['usd']:.4f} plan" in (second / "report.html").read_text()


@pytest.mark.slow
def test_an_endpoint_budget_stops_only_that_endpoint(tmp_path, scripted_server):
    provider = BillingProvider(worst_case=True)
    srv = scripted_server(provider)
    out = tmp_path / "run"
    res = invoke(["run", "--config", str(_config(tmp_path, srv.base_url, budget=0.01)),
                  "--suite", str(_suite(tmp_path, 20)), "--out", str(out), "--no-history", "-q"])
    assert res.exit_code == 0, res.output
    assert "STOPPED by budget" in res.output
    s = RunSummary.read(out)
    assert s.cost["cand"].usd <= 0.01 and s.cost["ref"].requests == _sent(20)["ref"]
    assert 0 < s.cost["cand"].requests < 20
    assert s.stopped is not None and s.stopped.endpoints["cand"]["stopped"]
    assert not s.stopped.endpoints["ref"]["stopped"]
    assert s.stopped.refused == 20 - s.cost["cand"].requests
    assert [c["cap"] for c in s.stopped.caps] == ["endpoint 'cand' budget"]


def test_dry_run_of_a_logprob_suite_counts_the_sampled_path_and_the_references_samples(tmp_path):
    """The plan counts what ``planned_exchanges`` counts: the probe, three requests per case and one forced request
    per sampled continuation on every endpoint, and the reference's own samples (the plan once counted 3 a case)."""
    cfg = _config(tmp_path, "http://127.0.0.1:9/v1")  # nothing listens: a dry run sends nothing
    res = invoke(["run", "--config", str(cfg), "--suite", "logprob-core", "--limit", "4", "--dry-run",
                  "--out", str(tmp_path / "plan"), "--no-history"])
    assert res.exit_code == 0, res.output
    plan = json.loads((tmp_path / "plan" / "plan.json").read_text())
    every = 1 + (3 + KL_SAMPLES) * 4
    assert (plan["endpoints"]["cand"]["requests"], plan["endpoints"]["ref"]["requests"]) == \
        (every, every + KL_SAMPLES * 4)
    assert plan["endpoints"]["ref"]["usd_high"] > plan["endpoints"]["cand"]["usd_high"] > 0


def test_dry_run_plans_the_claims_probes_and_their_bound_holds(tmp_path, scripted_server):
    """An endpoint stating ``response_format`` and a context length (with ``--probe-context``) gets the probes' rows
    in the plan: 3 JSON-mode requests and 3 context requests (two sizing, one near 97 % of the stated length), with
    usd and usd_high; the other endpoint none. Nothing is sent; then the real run's bill (the provider's own, probes
    included) stays under the plan's usd_high."""
    provider = BillingProvider()
    srv = scripted_server(provider)
    cfg, suite = _config(tmp_path, srv.base_url), _suite(tmp_path, 6)
    cfg.write_text(cfg.read_text() + 'claims = { supported_parameters = ["response_format"], context_length = 4096 }\n')
    common = ["--config", str(cfg), "--suite", str(suite), "--no-history", "--probe-context"]
    res = invoke(["run", *common, "--dry-run", "--out", str(tmp_path / "plan")])
    assert res.exit_code == 0, res.output
    assert srv.request_count == 0
    assert "response_format probe (claims)" in res.output and "context probe (--probe-context)" in res.output
    plan = json.loads((tmp_path / "plan" / "plan.json").read_text())
    rows = {(r["endpoint"], r["suite"]): r for r in plan["rows"]}
    fmt, ctx = rows[("cand", "response_format probe (claims)")], rows[("cand", "context probe (--probe-context)")]
    assert not any(e == "ref" and "probe" in s for e, s in rows)  # the reference states nothing
    assert fmt["requests"] == 3 and ctx["requests"] == 3
    assert fmt["completion_tokens"] == 3 * 32 and ctx["completion_tokens"] == 3
    assert ctx["prompt_tokens"] >= int(0.97 * 4096) - 1  # the large request at its target
    for r in (fmt, ctx):
        assert 0 < r["usd"] < r["usd_high"]
        assert r["usd"] == pytest.approx((r["prompt_tokens"] * PRICE["input"] + r["completion_tokens"]
                                          * PRICE["output"]) / 1e6)
    assert plan["endpoints"]["cand"]["requests"] == _sent(6)["cand"] + 6
    assert plan["endpoints"]["ref"]["requests"] == _sent(6)["ref"]
    assert plan["endpoints"]["cand"]["usd_high"] == pytest.approx(
        sum(r["usd_high"] for r in plan["rows"] if r["endpoint"] == "cand"))
    res = invoke(["run", *common, "--out", str(tmp_path / "run"), "-q"])
    assert res.exit_code == 0, res.output
    probes = sum(1 for _, path, body in srv.log if path.endswith("/chat/completions")
                 and ("response_format" in (body or {}) or "tools" not in (body or {})))
    assert probes == 6  # what the plan said: 3 JSON-mode requests and the 3 context requests
    assert provider.usd <= plan["usd_high"]
