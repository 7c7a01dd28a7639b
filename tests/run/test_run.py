"""``verifier run`` end to end against real loopback servers: folder, exit codes, one-line errors, secrets, resume."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.records import ExchangeRecord
from verifier.run.store import RunManifest
from verifier.run.summary import RunSummary
from verifier.testing import FaultInjector, Reply, schema_responder

CORE = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"
KEY = "sk-live-TOPSECRET-4242424242"


def make_suite(tmp_path: Path, n: int, *, bad_line: bool = False) -> Path:
    lines = CORE.read_text().splitlines()[:n]
    if bad_line:
        lines.insert(2, '{"messages": "not a list"}')
    p = tmp_path / "mini.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def invoke(args: list[str]):
    return CliRunner().invoke(app, args, catch_exceptions=False)


def base_args(srv_url: str, suite: Path, out: Path, db: Path) -> list[str]:
    return ["run", "--reference", f"ref={srv_url}", "--endpoint", f"cand={srv_url}", "--suite", str(suite),
            "--out", str(out), "--db", str(db), "--quiet"]


@pytest.mark.slow
def test_run_end_to_end_counts_problems_and_keeps_secrets_out(tmp_path, scripted_server, monkeypatch, caplog):
    monkeypatch.setenv("VERIFIER_TEST_KEY", KEY)
    inj = FaultInjector(schema_responder, {"429": 0.2, "500": 0.1}, seed=3, retry_after=0)
    srv = scripted_server(inj, api_key=KEY, echo_auth_in_errors=True)
    suite = make_suite(tmp_path, 12, bad_line=True)
    out, db = tmp_path / "run", tmp_path / "hist.sqlite"
    res = invoke(base_args(srv.base_url, suite, out, db) + ["--api-key-env", "VERIFIER_TEST_KEY"])
    assert res.exit_code == 0, res.output
    assert {"manifest.json", "records.jsonl", "summary.json"} <= {p.name for p in out.iterdir()}
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    assert summary.reference == "ref" and [e.name for e in summary.endpoints] == ["ref", "cand"]
    assert len(summary.input_problems) == 1 and summary.input_problems[0].line == 3
    assert summary.suites[0].case_count == 12 and summary.suites[0].skipped_lines == 1
    recs = [ExchangeRecord.model_validate_json(x) for x in (out / "records.jsonl").read_text().splitlines()]
    # 12 cases x 2 endpoints, and the reference answers all 12 a second time (its run-to-run floor: at least 50)
    assert len(recs) == 36 and len({r.key() for r in recs}) == 36 and all(r.ok for r in recs)
    assert sum(len(r.retried_statuses) for r in recs) == inj.injected["429"] + inj.injected["500"] > 0
    m = RunManifest.load(out)
    assert m.status == "completed" and m.endpoints[0].api_key_env == "VERIFIER_TEST_KEY"
    assert m.endpoints[0].model == "scripted-model"  # default model from GET /models
    # the key appears nowhere: not in any output file, the history db, stdout/stderr or logs
    for p in [*out.rglob("*"), db]:
        if p.is_file():
            assert KEY.encode() not in p.read_bytes(), p
    assert KEY not in res.output and KEY not in (res.stderr or "") and KEY not in caplog.text
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from sqlite_master").fetchone()[0] > 0
    # the run is indexed before the report is rendered, so the report already charts it from history
    assert '<section id="history">' in (out / "report.html").read_text()
    res = invoke(["report", str(out), "--no-history"])
    assert res.exit_code == 0 and '<section id="history">' not in (out / "report.html").read_text()
    res = invoke(["report", str(out), "--db", str(db)])
    assert res.exit_code == 0 and '<section id="history">' in (out / "report.html").read_text()


def test_unreachable_endpoint_exit_3_one_line(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    res = invoke(base_args(f"http://127.0.0.1:{port}/v1", make_suite(tmp_path, 2), tmp_path / "r", tmp_path / "h.db"))
    assert res.exit_code == 3
    err = res.stderr.strip().splitlines()
    assert err[-1].startswith("error: endpoint 'cand': cannot reach") or err[-1].startswith("error: endpoint 'ref': "
                                                                                            "cannot reach")
    assert all(line.startswith("error: endpoint") for line in err) and len(err) == 2


def test_bad_key_exit_2_one_line(tmp_path, scripted_server, monkeypatch):
    monkeypatch.setenv("VERIFIER_TEST_KEY", "wrong-key-value")
    srv = scripted_server(schema_responder, api_key=KEY)
    res = invoke(["run", "--reference", srv.base_url, "--suite", str(make_suite(tmp_path, 2)), "--out",
                  str(tmp_path / "r"), "--no-history", "-q", "--api-key-env", "VERIFIER_TEST_KEY"])
    assert res.exit_code == 2
    assert res.stderr.strip() == ("error: endpoint 'reference': authentication failed (HTTP 401); "
                                  "check $VERIFIER_TEST_KEY")


def test_unknown_model_exit_2(tmp_path, scripted_server):
    srv = scripted_server(schema_responder, models=["a", "b"])
    res = invoke(["run", "--reference", srv.base_url, "--model", "c", "--suite", str(make_suite(tmp_path, 2)),
                  "--out", str(tmp_path / "r"), "--no-history", "-q"])
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: endpoint 'reference': model 'c' is not served (available: a, b)"


def test_input_errors_exit_2(tmp_path, scripted_server, monkeypatch):
    srv = scripted_server(schema_responder)
    bad = make_suite(tmp_path, 4, bad_line=True)
    res = invoke(["run", "--reference", srv.base_url, "--suite", str(bad), "--strict", "--out", str(tmp_path / "r"),
                  "--no-history", "-q"])
    assert res.exit_code == 2 and res.stderr.strip().startswith(f"error: {bad}:3: ")
    res = invoke(["run", "--reference", srv.base_url, "--suite", "no-such-suite", "--no-history", "-q"])
    assert res.exit_code == 2 and "no-such-suite" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    monkeypatch.delenv("UNSET_KEY_VAR", raising=False)
    res = invoke(["run", "--reference", srv.base_url, "--api-key-env", "UNSET_KEY_VAR", "--suite", str(bad),
                  "--no-history", "-q"])
    assert res.exit_code == 2 and "UNSET_KEY_VAR is not set" in res.stderr
    toml = tmp_path / "e.toml"
    toml.write_text("[endpoints.a]\nbase_url = 'https://x/v1'\nrate = 'fast'\n")
    res = invoke(["run", "--config", str(toml), "--suite", str(bad), "--no-history", "-q"])
    assert res.exit_code == 2 and res.stderr.startswith(f"error: {toml}: endpoints.a.rate: ")


def test_all_exchanges_failing_is_exit_3(tmp_path, scripted_server):
    srv = scripted_server(lambda b, c: Reply.error(400, "bad request"))
    res = invoke(base_args(srv.base_url, make_suite(tmp_path, 3), tmp_path / "r", tmp_path / "h.db"))
    assert res.exit_code == 3 and "all 3 exchanges failed" in res.stderr
    assert RunManifest.load(tmp_path / "r").status == "failed"


@pytest.mark.slow
def test_kill_midway_then_resume_loses_and_duplicates_nothing(tmp_path, scripted_server):
    """A real SIGKILL of a running ``verifier run`` process, then ``--resume``: every exchange exactly once."""
    def slow(body, ctx):
        r = schema_responder(body, ctx)
        r.delay_s = 0.1  # 90 exchanges at concurrency 2: >= 4 s, so the kill lands midway even on a loaded machine
        return r

    srv = scripted_server(slow)
    n = 30
    suite, out = make_suite(tmp_path, n), tmp_path / "run"
    cmd = [sys.executable, "-m", "verifier.cli", "run", "--reference", f"ref={srv.base_url}", "--endpoint",
           f"cand={srv.base_url}", "--suite", str(suite), "--out", str(out), "--no-history", "-q", "--concurrency", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ})
    records = out / "records.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if records.exists() and records.read_text().count("\n") >= 10:
            break
        if proc.poll() is not None:
            pytest.fail(f"run exited early: {proc.stderr.read().decode()[-500:]}")
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = records.read_text().count("\n")
    planned = 3 * n  # 2 endpoints, and the reference's second answers (all n cases: fewer than 50)
    assert 10 <= before < planned  # killed midway
    sent_before = srv.request_count
    res = invoke(["run", "--resume", str(out), "--no-history", "-q"])
    assert res.exit_code == 0, res.stderr
    recs = [ExchangeRecord.model_validate_json(x) for x in records.read_text().splitlines()]
    keys = Counter(r.key() for r in recs)
    assert len(keys) == planned and max(keys.values()) == 1
    # the resumed run sent only what was missing (plus its two preflight /models calls)
    assert srv.request_count - sent_before == planned - before + 2
    m = RunManifest.load(out)
    assert m.status == "completed" and len(m.resumed_at) == 1
    assert json.loads((out / "summary.json").read_text())["results"]


@pytest.mark.slow
def test_report_command_rerenders_offline(tmp_path, scripted_server):
    srv = scripted_server(schema_responder)
    out = tmp_path / "run"
    assert invoke(base_args(srv.base_url, make_suite(tmp_path, 3), out, tmp_path / "h.db")).exit_code == 0
    (out / "report.html").unlink(missing_ok=True)
    srv.stop()
    res = invoke(["report", str(out)])
    assert res.exit_code == 0 and (out / "report.html").exists()
    assert invoke(["report", str(tmp_path / "nope")]).exit_code == 2


@pytest.mark.slow
def test_injected_faults_come_out_as_exact_counts_in_the_summary(tmp_path, scripted_server):
    """Faults injected at known rates on the candidate's server reach summary.json as exactly those counts."""
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "days": {"type": "integer"}}, "required": ["city"]}}}
    suite = tmp_path / "weather.jsonl"
    suite.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": f"weather in city {i}?"}],
                                           "tools": [tool], "tool_choice": "required", "_meta": {"id": f"w{i}"}})
                               for i in range(60)) + "\n")
    inj = FaultInjector(schema_responder, {"429": 0.1, "500": 0.1, "malformed_args": 0.15, "schema_violation": 0.15},
                        seed=11, retry_after=0)
    ref, cand = scripted_server(schema_responder), scripted_server(inj)
    out = tmp_path / "run"
    res = invoke(["run", "--reference", f"ref={ref.base_url}", "--endpoint", f"cand={cand.base_url}", "--suite",
                  str(suite), "--out", str(out), "--no-history", "-q"])
    assert res.exit_code == 0, res.stderr
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    c, r = summary.result("cand", "weather").counts, summary.result("ref", "weather").counts
    assert min(inj.injected.values()) > 0
    assert c["schema_not_json"] == inj.injected["malformed_args"] and r["schema_not_json"] == 0
    assert c["schema_schema_violation"] == inj.injected["schema_violation"] and r["schema_schema_violation"] == 0
    assert c["retries"] == inj.injected["429"] + inj.injected["500"] and r["retries"] == 0


def test_option_flag_parses_json_literals_and_rejects_malformed_pairs() -> None:
    """`--option KEY=VALUE` reaches suite kinds typed (numbers stay numbers, paths stay strings)."""
    from verifier.cli.main import _option_value

    assert _option_value("5") == 5
    assert _option_value("true") is True
    assert _option_value("suites/logprob/profiles.json") == "suites/logprob/profiles.json"
    from typer.testing import CliRunner

    from verifier.cli import app

    res = CliRunner().invoke(app, ["run", "--option", "noequals", "--reference", "http://127.0.0.1:9/v1"])
    assert res.exit_code == 2
