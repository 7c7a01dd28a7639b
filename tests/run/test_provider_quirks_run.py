"""A whole ``verifier run``: reference = a clean server, candidate = a server with the same replies written the way a
real provider writes them (issue #39 rows 1, 2, 3, 5, 8, 9), on loopback bytes.

A quirk that leaves the reply intact (a BOM, index-less parallel deltas, no ``[DONE]``) must not make the candidate
``differs``: its records equal the reference's and the verdict is ``consistent``. A reply the provider broke (an
in-band error, arguments nested 1,500 deep, a finish reason that is an object) is error-classified on exactly the
exchanges that carried it and left out of scoring, so the rest still comes out ``consistent``. Before the fixes,
rows 1 and 3 said ``differs``, row 2 scored the partial replies, row 5 ended the suite (exit 3), row 9 retried
every stream five times and failed it, row 8 scored the calls.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from verifier.http.endpoints import from_flags
from verifier.kinds.toolcall.reference_repeats import is_reference_repeat
from verifier.run.runner import RunSettings, execute_run
from verifier.run.store import RecordStore
from verifier.testing import Reply
from verifier.testing.scripted_server import completion_body, stream_events

N = 40  # broken quirks leave 3 in 4 cases scored: 30, the verdict policy's least for a tool-call metric
TOOLS = [{"type": "function", "function": {"name": n, "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    for n in ("get_weather", "get_time")]
BOM = b"\xef\xbb\xbf"
DEEP = "[" * 1500 + "]" * 1500
#: rows whose quirk leaves the reply intact (every stream carries it) / breaks it (a quarter of the cases carry it)
INTACT = {"bom", "no_index", "no_done"}
BROKEN = {"error_with_choices", "deep_arguments", "finish_object"}


def _case(body: dict) -> int:
    return int(body["messages"][0]["content"].rsplit(" ", 1)[1].rstrip("?"))


def _reply(i: int) -> Reply:
    """Case i's reply, the same from both servers: two parallel calls (ids fixed, so records compare equal)."""
    return Reply(tool_calls=[{"name": "get_weather", "arguments": {"city": f"c{i}"}, "id": f"call_{i}_0"},
                             {"name": "get_time", "arguments": {"city": f"c{i}"}, "id": f"call_{i}_1"}])


def _clean(body: dict, ctx: Any) -> Reply:
    return _reply(_case(body))


def _sse(events: list[str], *, done: bool = True, prefix: bytes = b"") -> Reply:
    return Reply(sse_bytes=prefix + b"".join(b"data: " + e.encode() + b"\n\n" for e in events)
                 + (b"data: [DONE]\n\n" if done else b""))


def _quirky(quirk: str):
    def respond(body: dict, ctx: Any) -> Reply:
        i = _case(body)
        reply = _reply(i)
        if quirk in BROKEN and i % 4:
            return reply
        if body.get("stream"):
            events = stream_events(reply, body, "chatcmpl-q")
            if quirk == "bom":  # the first event carries the first call's id and name (no role-only chunk)
                return _sse(events[1:], prefix=BOM)
            if quirk == "no_done":
                return _sse(events, done=False)
            chunks = [json.loads(e) for e in events]
            if quirk == "no_index":
                for c in chunks:
                    for d in c["choices"][0]["delta"].get("tool_calls", []) if c["choices"] else []:
                        del d["index"]
            elif quirk == "error_with_choices":  # OpenRouter: partial reply, then error + finish_reason "error"
                err = {**chunks[0], "error": {"code": "server_error", "message": "Provider disconnected"},
                       "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]}
                chunks = chunks[:4] + [err]
                if i % 8 == 0:  # half of them as an SSE error event instead
                    return Reply(sse_bytes=b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks[:4])
                                 + b'event: error\ndata: {"error": {"message": "overloaded"}}\n\n')
            elif quirk == "deep_arguments":
                for c in chunks:
                    for d in c["choices"][0]["delta"].get("tool_calls", []) if c["choices"] else []:
                        if d["index"] == 0 and d["function"]["arguments"]:
                            d["function"]["arguments"] = ""
                chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] = DEEP
            elif quirk == "finish_object":
                for c in chunks:
                    if c["choices"] and c["choices"][0]["finish_reason"]:
                        c["choices"][0]["finish_reason"] = {"type": "tool_calls"}
            return _sse([json.dumps(c) for c in chunks])
        if quirk not in BROKEN:
            return reply
        full = completion_body(reply, body, "chatcmpl-q")
        choice = full["choices"][0]
        if quirk == "error_with_choices":
            full["error"] = {"code": 502, "message": "Provider returned error"}
            choice["finish_reason"] = "error"
            choice["message"] = {"role": "assistant", "content": "partial"}
        elif quirk == "deep_arguments":
            choice["message"]["tool_calls"][0]["function"]["arguments"] = DEEP
        elif quirk == "finish_object":
            choice["finish_reason"] = {"type": "tool_calls"}
        return Reply(body=full)
    return respond


#: quirk -> variant -> the error class and the wire issue that names the quirk
EXPECTED_ERROR: dict[str, dict[str, tuple[str, str | None]]] = {
    "error_with_choices": {"stream": ("broken_stream", None), "nonstream": ("provider_error", "error_in_body")},
    "deep_arguments": {v: ("malformed_response", "tool_call_arguments_too_deep:0") for v in ("stream", "nonstream")},
    "finish_object": {v: ("malformed_response", "malformed_finish_reason") for v in ("stream", "nonstream")},
}


@pytest.mark.parametrize("quirk", sorted(INTACT | BROKEN))
def test_provider_quirk_is_never_scored_as_the_model(tmp_path: Path, scripted_server, quirk: str) -> None:
    suite = tmp_path / "parallel.jsonl"
    suite.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": f"weather and time in {i}?"}],
                                           "tools": TOOLS, "_meta": {"id": f"p{i}"}}) for i in range(N)) + "\n")
    ref, cand = scripted_server(_clean), scripted_server(_quirky(quirk))
    out = tmp_path / "run"
    outcome = execute_run(RunSettings(
        suites=[str(suite)], endpoints=from_flags(f"ref={ref.base_url}", [f"cand={cand.base_url}"]), out=out,
        display_progress=False, backoff_base=0.001, options={"variants": "both"}))
    assert not outcome.problems, outcome.problems  # row 5 used to end here: "failed while scoring: RecursionError"

    every = RecordStore(out / "records.jsonl").read()
    # a suite under 50 cases: the reference answers every case again in each variant (reference_repeats)
    assert sum(r.endpoint == "ref" and is_reference_repeat(r) for r in every) == N * 2
    records = [r for r in every if not is_reference_repeat(r)]
    assert len(records) == N * 2 * 2
    refs = {(r.case_id, r.variant): r for r in records if r.endpoint == "ref"}
    cands = [r for r in records if r.endpoint == "cand"]
    assert all(r.ok for r in refs.values())
    quirky = {f"p{i}" for i in range(N) if quirk in INTACT or i % 4 == 0}

    for r in cands:
        carried = r.case_id in quirky and (quirk in BROKEN or r.variant == "stream")
        if not carried or quirk in INTACT:
            # the reply is read as the reply: the very calls the reference recorded, sent once
            want = refs[(r.case_id, r.variant)]
            assert r.ok and r.attempts == 1, (r.case_id, r.variant, r.error_class, r.error_message)
            assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == \
                   [(c.id, c.name, c.arguments) for c in want.tool_calls]
            assert r.finish_reason == "tool_calls"
            if carried and quirk == "no_done":
                assert r.wire_issues == ["no_done"]
            if carried and quirk == "no_index":
                assert "tool_call_delta_without_index" in r.wire_issues
            continue
        cls, issue = EXPECTED_ERROR[quirk][r.variant or ""]
        assert r.error_class == cls and not r.ok, (r.case_id, r.variant, r.error_class, r.error_message)
        assert issue is None or issue in r.wire_issues, r.wire_issues
        if quirk == "error_with_choices":
            assert r.attempts == 5 and r.tool_calls == [] and r.content is None  # retried, partial reply dropped
            assert "error" in (r.error_message or "")

    res = outcome.summary.result("cand", "parallel")
    ref_res = outcome.summary.result("ref", "parallel")
    assert res is not None and ref_res is not None
    errors = Counter(r.error_class for r in cands if not r.ok)
    assert res.counts["request_errors"] == sum(errors.values()) == (0 if quirk in INTACT else 2 * len(quirky))
    # only the exchanges that were read count: every scored call is valid, as the reference's are
    assert res.metrics["schema_accuracy"].value == ref_res.metrics["schema_accuracy"].value == 1.0
    assert res.metrics["schema_accuracy"].n == 2 * (2 * N - res.counts["request_errors"])
    verdict = outcome.summary.verdicts["cand"]
    assert verdict.status == "consistent", verdict.headline


def test_verifier_run_cli_with_deep_arguments_exits_0(tmp_path: Path, scripted_server) -> None:
    """Row 5 through the command line: it used to print "failed while scoring: RecursionError" and exit 3."""
    from typer.testing import CliRunner

    from verifier.cli import app

    suite = tmp_path / "parallel.jsonl"
    suite.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": f"weather and time in {i}?"}],
                                           "tools": TOOLS, "_meta": {"id": f"p{i}"}}) for i in range(8)) + "\n")
    ref, cand = scripted_server(_clean), scripted_server(_quirky("deep_arguments"))
    res = CliRunner().invoke(app, ["run", "--reference", f"ref={ref.base_url}", "--endpoint", f"cand={cand.base_url}",
                                   "--suite", str(suite), "--out", str(tmp_path / "run"), "--no-history", "-q"])
    assert res.exit_code == 0, (res.exit_code, res.stderr, res.exception)
    assert "RecursionError" not in res.stderr + res.stdout
    records = RecordStore(tmp_path / "run" / "records.jsonl").read()
    bad = [r for r in records if r.endpoint == "cand" and not r.ok]
    assert sorted(r.case_id for r in bad) == ["p0", "p4"] and {r.error_class for r in bad} == {"malformed_response"}
