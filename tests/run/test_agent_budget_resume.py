"""A budget-stopped agent run resumes exactly (issue 40): the trial the cap cut short continues at its first
unrecorded step instead of restarting, so no step is sent (or paid for) twice and the records are those of an
uninterrupted run. Real CLI, a scripted oracle agent behind a loopback server that reports usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.kinds.agent.kind import AGENT_KIND
from verifier.records import ExchangeRecord
from verifier.run.summary import RunSummary
from verifier.testing import ScriptedServer
from verifier.testing.scripted_agent import OraclePolicy

SPECS = [{"env": "tickets", "horizon": 10}, {"env": "ledger", "horizon": 20}]


def _config(tmp_path: Path, url: str) -> Path:
    p = tmp_path / "endpoints.toml"
    p.write_text("".join(f'[endpoints.{n}]\nbase_url = "{url}"\nconcurrency = 1\n'
                         'price = { input = 0.60, output = 2.50, cached_input = 0.15 }\n' for n in ("ref", "cand")))
    return p


def _chats(srv: ScriptedServer) -> int:
    return sum(1 for method, path, _ in srv.log if method == "POST" and path.endswith("/chat/completions"))


def _trials(out: Path) -> dict[tuple[str, str, int], list[tuple[int, int, str]]]:
    """Per trial: (step, attempt, actions) of every record, in step order."""
    recs = [ExchangeRecord.model_validate_json(x) for x in (out / "records.jsonl").read_text().splitlines()]
    by: dict[tuple[str, str, int], list[tuple[int, int, str]]] = {}
    for r in recs:
        by.setdefault((r.endpoint, r.case_id, r.repeat), []).append(
            (r.step or 0, int(r.extra["attempt"]), json.dumps(r.extra.get("actions"))))
    return {k: sorted(v) for k, v in by.items()}


def invoke(args: list[str]):
    return CliRunner().invoke(app, args, catch_exceptions=False)


@pytest.mark.slow
def test_budget_stopped_agent_run_resumes_exactly(tmp_path: Path) -> None:
    spec = tmp_path / "scenarios.jsonl"
    spec.write_text("".join(json.dumps(s) + "\n" for s in SPECS))
    cases = AGENT_KIND.load(str(spec), {}).cases
    common = ["--suite", f"agent:{spec}", "--no-history", "-q"]
    with ScriptedServer(OraclePolicy(cases), models=["ref", "cand"]) as srv:  # uninterrupted, to compare with
        cfg = _config(tmp_path, srv.base_url)
        res = invoke(["run", "--config", str(cfg), *common, "--out", str(tmp_path / "whole")])
        assert res.exit_code == 0, res.output
        whole_requests, whole = _chats(srv), _trials(tmp_path / "whole")
        whole_usd = sum(c.usd or 0 for c in RunSummary.read(tmp_path / "whole").cost.values())
    assert whole_requests == 2 * (11 + 21)  # each endpoint: 10 + 20 calls and two final answers
    with ScriptedServer(OraclePolicy(cases), models=["ref", "cand"]) as srv:
        cfg = _config(tmp_path, srv.base_url)
        out = tmp_path / "cut"
        budget = round(whole_usd / 3, 6)
        res = invoke(["run", "--config", str(cfg), *common, "--out", str(out), "--budget", str(budget)])
        assert res.exit_code == 0, res.output
        s = RunSummary.read(out)
        assert s.stopped is not None and s.stopped.reason == "budget"
        cut = _trials(out)
        unfinished = [k for k, steps in cut.items() if len(steps) < len(whole[k])]
        assert unfinished  # the cap cut at least one trial short, mid-trial
        res = invoke(["run", "--resume", str(out), "--config", str(cfg), "--budget", "100", "--no-history", "-q"])
        assert res.exit_code == 0, res.output
        assert _chats(srv) == whole_requests  # no step sent twice (the first run and the resume together)
    resumed = _trials(out)
    assert resumed == whole  # same steps, same actions, every trial in its first attempt
    assert RunSummary.read(out).stopped is None
