"""``builtin:`` endpoints: the run starts the reference engine on loopback, names it by its builtin URL, stops it."""

from __future__ import annotations

import json
import multiprocessing

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.run.store import RunManifest
from verifier.run.summary import RunSummary


@pytest.mark.slow
def test_builtin_endpoints_are_started_used_and_published_without_ports(tmp_path):
    from reference_engine.tiny_checkpoint import build_checkpoint

    ckpt = build_checkpoint(tmp_path / "ckpt")
    suite = tmp_path / "s.jsonl"
    tools = [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}]
    suite.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": f"hi {i}"}], "tools": tools,
                                           "max_tokens": 4, "temperature": 0}) for i in range(2)) + "\n")
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--reference", f"builtin:{ckpt}", "--endpoint", f"fp8=builtin:{ckpt}?kv=fp8",
                                   "--suite", str(suite), "--out", str(out), "--no-history", "-q"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(recs) == 6 and all(r["status"] == 200 for r in recs)  # the reference answers both cases twice
    assert all(r["usage"]["cached_field"] == "prompt_tokens_details.cached_tokens" for r in recs)
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    eps = {e.name: e for e in summary.endpoints}
    assert eps["fp8"].base_url == f"builtin:{ckpt}?kv=fp8" and eps["fp8"].builtin["kv"] == "fp8"
    assert eps["reference"].builtin["kv"] == "bf16" and eps["reference"].model == "ckpt"
    assert RunManifest.load(out).endpoints[1].source == f"builtin:{ckpt}?kv=fp8"
    # each engine ran in its own process, and none outlives the run
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("reference-engine")]
    t = summary.timings  # where the time went: the engines' start, each suite with its exchanges
    assert t is not None and t.engines_s > 0 and t.started_unix < t.finished_unix
    assert [(s.suite, s.exchanges) for s in t.suites] == [(summary.suites[0].name, 6)]


def test_builtin_engine_that_cannot_start_is_one_line_exit_3(tmp_path):
    res = CliRunner().invoke(app, ["run", "--reference", f"builtin:{tmp_path / 'missing'}", "--suite", "toolcall-core",
                                   "--limit", "1", "--out", str(tmp_path / "r"), "--no-history", "-q"])
    assert res.exit_code == 3
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "missing" in lines[0]
    assert lines[0].startswith("error: endpoint 'reference': the built-in engine")
