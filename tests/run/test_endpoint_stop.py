"""Issue #39 row 7: an endpoint whose ``GET /models`` answers but every chat request is refused (401/403/404).

`verifier run` end to end against two real loopback servers: the candidate is stopped after 3 refused chat
requests in a row (none answered), one line names the status and what to check (never the key), the reference
still runs every case, what was measured is kept, and ``--resume`` sends what was never sent.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.http.stopping import STOP_AFTER
from verifier.records import ExchangeRecord
from verifier.run.summary import RunSummary
from verifier.testing import Reply, schema_responder

pytestmark = pytest.mark.slow  # whole runs (two endpoints, 24 cases, report): ~6-15 s each on a shared machine

CORE = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"
KEY = "sk-live-CANDIDATE-SECRET-77777777"
CASES = 24
REF_EXCHANGES = 2 * CASES  # a suite under 50 cases: the reference answers every case twice (reference_repeats)


def _suite(tmp_path: Path) -> Path:
    p = tmp_path / "mini.jsonl"
    p.write_text("\n".join(CORE.read_text().splitlines()[:CASES]) + "\n")
    return p


def _config(tmp_path: Path, ref_url: str, cand_url: str, *, cand_model: str = "scripted-model") -> Path:
    p = tmp_path / "eps.toml"
    p.write_text(f'reference = "ref"\n[endpoints.ref]\nbase_url = "{ref_url}"\n'
                 f'[endpoints.cand]\nbase_url = "{cand_url}"\nmodel = "{cand_model}"\napi_key_env = "CAND_KEY"\n'
                 "concurrency = 1\nmax_attempts = 1\n")
    return p


def _records(out: Path) -> list[ExchangeRecord]:
    return [ExchangeRecord.model_validate_json(x) for x in (out / "records.jsonl").read_text().splitlines()]


def _run(args: list[str]):
    return CliRunner().invoke(app, ["run", *args, "--no-history", "--quiet"], catch_exceptions=False)


@pytest.mark.parametrize("status", [401, 403])
def test_chat_refused_stops_the_endpoint_after_a_few_with_one_line_and_no_key(tmp_path, scripted_server, monkeypatch,
                                                                               caplog, status):
    monkeypatch.setenv("CAND_KEY", KEY)
    caplog.set_level(logging.WARNING)
    ref = scripted_server(schema_responder)
    refusing = {"on": True}

    def cand_responder(body, ctx):
        if refusing["on"]:
            return Reply.error(status, f"key rejected: {ctx.headers.get('authorization')}")  # a hostile echo
        return schema_responder(body, ctx)

    cand = scripted_server(cand_responder)
    out = tmp_path / "run"
    res = _run(["--config", str(_config(tmp_path, ref.base_url, cand.base_url)), "--suite", str(_suite(tmp_path)),
                "--out", str(out)])
    assert res.exit_code == 3, res.output
    stderr = res.stderr or res.output
    last = stderr.strip().splitlines()[-1]
    assert last == (f"error: endpoint 'cand': stopped after {STOP_AFTER} chat requests in a row were refused with "
                    f"HTTP {status} and none was answered: check the key in $CAND_KEY (its value is never shown) and "
                    f"that it may use chat; {CASES - STOP_AFTER} request(s) not sent (--resume sends them)")
    assert "all " not in stderr  # no "all N exchanges failed" hiding the status
    chat_posts = [p for m, p, _ in cand.log if p.endswith("/chat/completions")]
    assert len(chat_posts) == STOP_AFTER  # concurrency 1: nothing after the third refusal went out
    recs = _records(out)
    assert sum(r.endpoint == "ref" and r.ok for r in recs) == REF_EXCHANGES  # the other endpoint ran every case
    cand_recs = [r for r in recs if r.endpoint == "cand"]
    assert len(cand_recs) == STOP_AFTER and all(r.error_class == "auth" for r in cand_recs)  # what was measured
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    assert {r.endpoint for r in summary.results} >= {"ref"}
    progress = summary.settings["progress"]
    assert progress["not_sent"] == CASES - STOP_AFTER  # the tally counts what went out, nothing else
    assert (progress["exchanges"], progress["errors"]) == (REF_EXCHANGES + STOP_AFTER, STOP_AFTER)
    for p in out.rglob("*"):
        if p.is_file():
            assert KEY.encode() not in p.read_bytes(), p
    assert KEY not in res.output and KEY not in (res.stderr or "") and KEY not in caplog.text

    refusing["on"] = False  # the key is fixed: --resume sends what was never sent, nothing twice
    res2 = _run(["--resume", str(out), "--config", str(_config(tmp_path, ref.base_url, cand.base_url))])
    assert res2.exit_code == 0, res2.output
    cand_recs = [r for r in _records(out) if r.endpoint == "cand"]
    assert len(cand_recs) == CASES and sum(r.ok for r in cand_recs) == CASES - STOP_AFTER
    assert len([p for m, p, _ in cand.log if p.endswith("/chat/completions")]) == CASES


def test_chat_404_names_the_model_and_base_url(tmp_path, scripted_server, monkeypatch):
    """``/models`` lists a model the chat route does not serve: the hint is the model name and the base URL."""
    monkeypatch.setenv("CAND_KEY", KEY)
    ref = scripted_server(schema_responder)
    cand = scripted_server(lambda body, ctx: Reply.error(404, "no such route"))
    out = tmp_path / "run"
    res = _run(["--config", str(_config(tmp_path, ref.base_url, cand.base_url)), "--suite", str(_suite(tmp_path)),
                "--out", str(out)])
    assert res.exit_code == 3
    last = (res.stderr or res.output).strip().splitlines()[-1]
    assert last.startswith(f"error: endpoint 'cand': stopped after {STOP_AFTER} chat requests in a row were refused "
                           "with HTTP 404")
    assert f"check the model name 'scripted-model' and the base URL {cand.base_url} " in last
    assert f"(chat goes to {cand.base_url}/chat/completions)" in last
    assert sum(1 for r in _records(out) if r.endpoint == "ref" and r.ok) == REF_EXCHANGES


def test_refusals_after_a_success_do_not_stop_the_endpoint(tmp_path, scripted_server):
    """A key revoked mid-run, or a few unknown-model cases, are measured as they come: not a wrong setup."""
    ref = scripted_server(schema_responder)

    def cand_responder(body, ctx):
        return schema_responder(body, ctx) if ctx.request_index <= 2 else Reply.error(401, "revoked")

    cand = scripted_server(cand_responder)
    cfg = tmp_path / "eps.toml"
    cfg.write_text(f'reference = "ref"\n[endpoints.ref]\nbase_url = "{ref.base_url}"\n'
                   f'[endpoints.cand]\nbase_url = "{cand.base_url}"\nconcurrency = 1\nmax_attempts = 1\n')
    out = tmp_path / "run"
    res = _run(["--config", str(cfg), "--suite", str(_suite(tmp_path)), "--out", str(out)])
    assert res.exit_code == 0, res.output
    cand_recs = [r for r in _records(out) if r.endpoint == "cand"]
    assert len(cand_recs) == CASES and sum(r.error_class == "auth" for r in cand_recs) >= CASES - 2
    assert "stopped after" not in (res.stderr or res.output)
