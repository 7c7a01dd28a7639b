"""The ``response_format`` probe's classification and claim rule (verifier/run/format_probe, verifier/run/claims).

Replies go over real loopback HTTP (the scripted server) through the real client, so ``classify`` sees exactly the
``Exchange`` a provider's answer becomes; the rule is then read from the claims table. The whole run, with the
built-in engine, is tests/run/test_claims_response_format.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from verifier.http.client import EndpointClient
from verifier.http.endpoints import load_config
from verifier.records import StatedClaims
from verifier.run import format_probe
from verifier.run.claims import check_claims, contradiction_headline
from verifier.run.format_probe import PROBES_FILE, PROMPTS, FormatProbe, FormatReply
from verifier.run.summary import EndpointInfo, RunSummary
from verifier.testing.replies import Reply, RequestContext

N = len(PROMPTS)
OBJECT = Reply.text('{"name": "apple", "color": "red"}')
ERROR = {"error": {"message": "boom", "type": "server_error"}}


def _serve(scripted_server, replies: list[Reply]):
    """A provider answering JSON-mode requests with ``replies`` in turn (the last one repeated)."""
    seen: list[dict] = []

    def respond(body: dict, ctx: RequestContext) -> Reply:
        seen.append(body)
        return replies[min(len(seen), len(replies)) - 1]
    return scripted_server(respond), seen


def _config(tmp_path: Path, url: str, *, states: bool = True) -> Path:
    toml = tmp_path / "e.toml"
    claims = '\nclaims = { supported_parameters = ["response_format"] }' if states else ""
    toml.write_text(f'reference = "cand"\n[endpoints.cand]\nbase_url = "{url}"\nmodel = "scripted-model"\n'
                    f'max_attempts = 1{claims}\n')
    return toml


def _probe(tmp_path: Path, url: str, run_dir: Path | None = None, *, states: bool = True) -> FormatProbe | None:
    endpoints = load_config(_config(tmp_path, url, states=states))
    run_dir = run_dir or tmp_path

    async def go() -> None:
        async with EndpointClient(endpoints.get("cand"), backoff_base=0.001) as client:
            await format_probe.probe_endpoints({"cand": client}, endpoints, run_dir)
    asyncio.run(go())
    return format_probe.load_probes(run_dir).get("cand")


def _row(probe: FormatProbe | None) -> tuple[str, str]:
    summary = RunSummary(run_id="r", started_at="t", verifier_version="t", reference="ref", suites=[], results=[],
                         endpoints=[EndpointInfo(name="cand", base_url="y",
                                                 claims=StatedClaims(supported_parameters=["response_format"]))])
    row = check_claims(summary, formats={"cand": probe} if probe else None)["cand"][0]
    assert row.claim == "supported_parameters:response_format"
    return row.status, row.evidence


@pytest.mark.parametrize(("replies", "status", "evidence"), [
    ([OBJECT], "agrees", f"{N} of {N} replies to response_format json_object parsed as JSON objects"),
    ([OBJECT, Reply.text('```json\n{"a": 1}\n```')], "contradicts",
     f"{N - 1} of {N} replies to response_format json_object did not parse as a JSON object (first: '```json "
     f"{{\"a\": 1}} ```'); 1 of {N} did"),
    ([Reply.text("[1, 2]")], "contradicts", "did not parse as a JSON object (first: '[1, 2]')"),
    ([Reply.tool_call("f", {})], "contradicts", "did not parse as a JSON object (first: no content)"),
    ([Reply(status=422, body={"error": {"message": "Unknown field: response_format"}})], "contradicts",
     f"response_format json_object refused in {N} of {N} requests: HTTP 422 Unknown field: response_format"),
    ([Reply(status=400, body={"error": {"message": "temperature must be positive"}})], "not checked",
     f"{N} of {N} requests refused without naming response_format (HTTP 400: temperature must be positive)"),
    ([OBJECT, Reply(status=503, body=ERROR)], "not checked",
     f"1 of {N} replies to response_format json_object parsed as JSON objects; {N - 1} of {N} requests failed "
     "without an answer"),
    ([Reply(status=429, body=ERROR)], "not checked", "failed without an answer"),
    ([Reply(content='{"name": "a very long', finish_reason="length")], "not checked",
     f"{N} of {N} replies cut by max_tokens before the object closed"),
    ([Reply(content="Once upon a time", finish_reason="length")], "contradicts", "(first: 'Once upon a time')"),
])
def test_each_answer_shape_gives_its_status(tmp_path: Path, scripted_server, replies: list[Reply], status: str,
                                            evidence: str) -> None:
    srv, seen = _serve(scripted_server, replies)
    got = _row(_probe(tmp_path, srv.base_url))
    assert got[0] == status and evidence in got[1], got
    assert len(seen) == N and all(b["response_format"] == {"type": "json_object"} and "JSON" in
                                  b["messages"][-1]["content"] for b in seen)


def test_nothing_is_sent_without_the_claim_and_no_probe_is_not_checked(tmp_path: Path, scripted_server) -> None:
    srv, seen = _serve(scripted_server, [OBJECT])
    assert _probe(tmp_path, srv.base_url, states=False) is None
    assert seen == [] and not (tmp_path / PROBES_FILE).exists()
    assert _row(None) == ("not checked", "no response_format probe recorded for this endpoint (the run sends one "
                                         "when the parameter is stated; a run folder from an older version has none)")


def test_resume_keeps_a_conclusive_probe_and_retries_a_faulted_one(tmp_path: Path, scripted_server) -> None:
    run = tmp_path / "run"
    run.mkdir()
    down, _ = _serve(scripted_server, [Reply(status=500, body=ERROR)])
    assert _row(_probe(tmp_path, down.base_url, run))[0] == "not checked"
    up, seen = _serve(scripted_server, [OBJECT])
    assert _row(_probe(tmp_path, up.base_url, run))[0] == "agrees" and len(seen) == N
    again, seen_again = _serve(scripted_server, [Reply.text("prose")])
    assert _row(_probe(tmp_path, again.base_url, run))[0] == "agrees" and seen_again == []  # kept, not re-paid


def test_headline_and_an_unreadable_probe_file(tmp_path: Path) -> None:
    refused = FormatProbe(replies=[FormatReply(outcome="refused", status=400, detail="response_format is not "
                                                                                     "supported")] * N)
    summary = RunSummary(run_id="r", started_at="t", verifier_version="t", reference="ref", suites=[], results=[],
                         endpoints=[EndpointInfo(name="cand", base_url="y",
                                                 claims=StatedClaims(supported_parameters=["response_format"]))])
    checks = check_claims(summary, formats={"cand": refused})["cand"]
    assert contradiction_headline("cand", checks) == (
        f"cand states support for response_format; response_format json_object refused in {N} of {N} requests: "
        "HTTP 400 response_format is not supported")
    (tmp_path / PROBES_FILE).write_text(json.dumps({"probes": {"cand": {"replies": [{"outcome": "maybe"}]}}}))
    assert format_probe.load_probes(tmp_path) == {}
