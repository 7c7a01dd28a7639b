"""A whole ``verifier run`` against a loopback server that answers a share of requests with hostile 200 bodies,
permanent 5xx and lone UTF-16 surrogates: the suite completes with every planned record, hostile shapes are
classified (never scored as a model decision), records with surrogates are stored losslessly, and ``--resume``
of such a run finishes without sending anything twice.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from verifier.cli.compose import Publish, run_and_publish
from verifier.http.endpoints import from_flags
from verifier.run.runner import RunSettings, execute_run
from verifier.run.store import RecordStore
from verifier.testing import FaultInjector, Reply, schema_responder

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _suite(tmp_path: Path, n: int) -> Path:
    p = tmp_path / "weather.jsonl"
    p.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": f"weather in city {i}?"}],
                                       "tools": [TOOL], "tool_choice": "required", "_meta": {"id": f"w{i}"}})
                           for i in range(n)) + "\n")
    return p


def _settings(url_ref: str, url_cand: str, suite: Path, out: Path, resume: bool = False) -> RunSettings:
    eps = from_flags(f"ref={url_ref}", [f"cand={url_cand}"])
    return RunSettings(suites=[] if resume else [str(suite)], endpoints=None if resume else eps,
                       out=None if resume else out, resume=out if resume else None,
                       display_progress=False, backoff_base=0.001, options={"variants": "both"})


@pytest.mark.slow
def test_hostile_bodies_never_end_the_suite_and_resume_finishes(tmp_path, scripted_server):
    n = 40
    inj = FaultInjector(schema_responder, {"hostile_body": 0.25, "permanent_500": 0.1, "lone_surrogate": 0.2}, seed=7)

    def responder(body, ctx):
        # JSON nested deeper than any parser recurses: the client's own json.loads raises RecursionError, which
        # only the per-exchange guard catches (before it, gather ended the suite and lost answered records)
        if body["messages"][0]["content"] in ("weather in city 3?", "weather in city 5?") and not body.get("stream"):
            return Reply(body=b"[" * 200_000)
        return inj(body, ctx)

    ref, cand = scripted_server(schema_responder), scripted_server(responder)
    suite, out = _suite(tmp_path, n), tmp_path / "run"
    outcome = execute_run(_settings(ref.base_url, cand.base_url, suite, out))
    assert min(inj.injected[k] for k in ("hostile_body", "permanent_500", "lone_surrogate")) > 0, inj.injected

    records = RecordStore(out / "records.jsonl").read()
    planned = n * 2 * 2 + n * 2  # cases x variants x endpoints, and the reference's second answers (all n < 50)
    assert len(records) == planned and len({r.key() for r in records}) == planned
    cand_recs = [r for r in records if r.endpoint == "cand"]
    errors = Counter(r.error_class for r in cand_recs if not r.ok)
    # every hostile stream whose data lines hold no completion chunk is a provider fault, never "no tool call"
    assert errors["malformed_response"] > 0, errors
    assert errors["server_error"] == 2 * inj.injected["permanent_500"]
    deep = [r for r in cand_recs if r.case_id in ("w3", "w5") and r.variant == "nonstream"]
    assert len(deep) == 2 and all(r.error_class in ("harness_error", "malformed_response") for r in deep), deep
    assert all(r.ok for r in records if r.endpoint == "ref")

    # lone surrogates: stored, read back as the same text, scored as text
    raw = (out / "records.jsonl").read_bytes()
    assert b"\\ud83d" in raw.lower()
    lone = [r for r in cand_recs if r.ok and any("\ud83d" in (c.arguments or "") for c in r.tool_calls)]
    assert lone, "no record kept a lone surrogate"
    paired = [r for r in cand_recs if r.ok and r.stream and any("😀" in c.arguments for c in r.tool_calls)]
    assert paired, "a pair split across two deltas was not joined into one character"

    # the result's counts match records.jsonl
    res = outcome.summary.result("cand", "weather")
    assert res.counts["requests"] == len(cand_recs)
    assert res.counts["request_errors"] == sum(not r.ok for r in cand_recs)

    # resume after losing the tail of the log (as a kill would): finishes, sends only the missing, duplicates nothing
    lines = raw.splitlines(keepends=True)
    keep = len(lines) - 30
    (out / "records.jsonl").write_bytes(b"".join(lines[:keep]))
    (out / "summary.json").unlink()
    before = cand.request_count + ref.request_count
    outcome2 = run_and_publish(_settings(ref.base_url, cand.base_url, suite, out, resume=True),
                               Publish(history=False))
    records2 = RecordStore(out / "records.jsonl").read()
    assert len(records2) == planned and len({r.key() for r in records2}) == planned
    assert not outcome2.problems, outcome2.problems
    assert not outcome2.warnings and (out / "report.html").is_file(), outcome2.warnings  # the report renders too
    sent = cand.request_count + ref.request_count - before
    assert sent >= 30 + 2  # 30 exchanges (more with retries of permanent 500s) plus one preflight per endpoint
    progress = outcome2.summary.settings["progress"]
    assert progress["exchanges"] == planned  # the resumed run's figures cover the whole run
    assert progress["errors"] == sum(not r.ok for r in records2)
    assert progress["resumed"] == planned - 30
