"""A stated ``response_format`` checked by the JSON-mode probe, end to end on loopback (verifier/run/format_probe).

One ``verifier run`` against five endpoints: the built-in engine (JSON mode by constrained decoding: agrees), a
scripted provider that ignores ``response_format`` and answers prose (contradicts), one that answers 400
"response_format is not supported" (contradicts), one that answers 500 to JSON-mode requests (not checked: a
provider fault says nothing about the parameter), and one that states no claims (it gets no probe at all).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.run.format_probe import PROBES_FILE, PROMPTS
from verifier.testing.replies import Reply, RequestContext, Responder
from verifier.testing.responders import schema_responder

pytest.importorskip("reference_engine.launch")

REPO = Path(__file__).resolve().parents[2]
CLAIM = "supported_parameters:response_format"
N = len(PROMPTS)


def _json_mode(body: dict) -> bool:
    return (body.get("response_format") or {}).get("type") == "json_object"


def _provider(json_mode_reply: Reply) -> Responder:
    """Answers the suite like any provider; answers JSON-mode requests with ``json_mode_reply``."""
    def respond(body: dict, ctx: RequestContext) -> Reply:
        return json_mode_reply if _json_mode(body) else schema_responder(body, ctx)
    return respond


PROSE = Reply.text("Sure! A banana is a long yellow fruit, sweet when ripe.")
REFUSAL = Reply(status=400, body={"error": {"message": "response_format is not supported", "type":
                                            "invalid_request_error", "param": "response_format"}})
CRASH = Reply(status=500, body={"error": {"message": "internal error", "type": "server_error"}})


@pytest.mark.slow
def test_json_mode_probe_agrees_contradicts_and_leaves_faults_open(tmp_path: Path, scripted_server) -> None:
    prose, refuses, broken = (scripted_server(_provider(r)) for r in (PROSE, REFUSAL, CRASH))
    silent = scripted_server(_provider(PROSE))
    suite = tmp_path / "one.jsonl"  # one tool-call case: the run needs a suite; the probe is apart from it
    suite.write_text((REPO / "suites/toolcall/data/toolcall-schemas.jsonl").read_text().splitlines(True)[0])
    states = 'claims = { supported_parameters = ["tools", "response_format"] }'
    toml = tmp_path / "endpoints.toml"
    toml.write_text(
        f'reference = "engine"\n[endpoints.engine]\nbase_url = "builtin:tiny"\n{states}\n'
        f'[endpoints.prose]\nbase_url = "{prose.base_url}"\nmodel = "scripted-model"\n{states}\n'
        f'[endpoints.refuses]\nbase_url = "{refuses.base_url}"\nmodel = "scripted-model"\n{states}\n'
        f'[endpoints.broken]\nbase_url = "{broken.base_url}"\nmodel = "scripted-model"\nmax_attempts = 2\n{states}\n'
        f'[endpoints.silent]\nbase_url = "{silent.base_url}"\nmodel = "scripted-model"\n')
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--config", str(toml), "--suite", str(suite), "--out", str(run),
                                   "--no-history", "-q"])
    assert res.exit_code == 0, res.stderr
    summary = json.loads((run / "summary.json").read_text())
    rows = {ep: next(c for c in checks if c["claim"] == CLAIM) for ep, checks in summary["claims"].items()}

    assert rows["engine"]["status"] == "agrees"
    assert rows["engine"]["evidence"] == f"{N} of {N} replies to response_format json_object parsed as JSON objects"
    assert rows["prose"]["status"] == "contradicts"
    assert rows["prose"]["evidence"].startswith(f"{N} of {N} replies to response_format json_object did not parse "
                                                "as a JSON object (first: 'Sure! A banana")
    assert rows["prose"]["measured"] == f"parsed 0 of {N}"
    assert rows["refuses"]["status"] == "contradicts"
    assert rows["refuses"]["evidence"] == (f"response_format json_object refused in {N} of {N} requests: HTTP 400 "
                                           "response_format is not supported")
    assert rows["broken"]["status"] == "not checked"
    assert rows["broken"]["evidence"].startswith(f"0 of {N} replies to response_format json_object parsed as JSON "
                                                 f"objects; {N} of {N} requests failed without an answer")
    assert "silent" not in summary["claims"]
    assert summary["verdicts"]["refuses"]["headline"].startswith(
        "refuses states support for response_format; response_format json_object refused")

    # the probe is recorded beside the run, never as suite output
    probes = json.loads((run / PROBES_FILE).read_text())["probes"]
    assert sorted(probes) == ["broken", "engine", "prose", "refuses"]
    assert [r["outcome"] for r in probes["engine"]["replies"]] == ["parsed"] * N
    assert all(isinstance(json.loads(r["content"]), dict) for r in probes["engine"]["replies"])
    assert [r["status"] for r in probes["broken"]["replies"]] == [500] * N
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert {(r["suite"], r["case_id"]) for r in records} == {(summary["suites"][0]["name"], "schemas-00000")}
    # an endpoint that states nothing is sent nothing extra; the others got exactly the probe's requests
    assert not any(_json_mode(b or {}) for _, _, b in silent.log)
    assert sum(_json_mode(b or {}) for _, _, b in prose.log) == N
    assert sum(_json_mode(b or {}) for _, _, b in broken.log) == 2 * N  # each tried twice: still a fault
