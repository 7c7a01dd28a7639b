"""K2VV's schema rule on edge replies, end to end: a K2VV-format file, `verifier run` against a scripted loopback
server, real records, and counts that must equal the ones worked out by hand from K2VV's published rule.

The rule (K2VV README and validator): a reply is a tool-call reply when finish_reason == "tool_calls"; it is valid
when it has at least one call and every call names an offered tool whose `parameters` is a non-empty schema, whose
arguments parse as JSON (json.loads of the string as sent) and which pass jsonschema.validate (draft from $schema,
default 2020-12, no format checks, schema checked against its metaschema).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.kinds.toolcall import k2vv_rule
from verifier.kinds.toolcall.reference_repeats import is_reference_repeat
from verifier.records import ExchangeRecord, ToolCall
from verifier.run.summary import RunSummary
from verifier.testing import Reply, RequestContext


def _tool(name: str, params: Any = "absent") -> dict:
    fn: dict[str, Any] = {"name": name, "description": f"{name} tool"}
    if params != "absent":
        fn["parameters"] = params
    return {"type": "function", "function": fn}


WEATHER = _tool("get_weather", {"type": "object", "properties": {"city": {"type": "string"}},
                                "required": ["city"], "additionalProperties": False})
OPT = _tool("set_mode", {"type": "object", "properties": {"verbose": {"type": "boolean"}}})
PING = _tool("ping", {})                                   # empty parameters: K2VV rejects every call
NOOP = _tool("noop")                                       # no parameters key at all: K2VV rejects every call
BOOK = _tool("book", {"type": "object", "properties": {"day": {"type": "string", "format": "date"}},
                      "required": ["day"]})
# draft-04's boolean exclusiveMinimum: valid only when the draft is read from $schema (2020-12 rejects it)
D4 = _tool("count", {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                     "properties": {"n": {"type": "integer", "minimum": 0,
                                          "exclusiveMinimum": True}}, "required": ["n"]})
ANY = _tool("anything", True)                              # the boolean schema true: accepts everything
NEVER = _tool("never", False)                              # false: falsy, so K2VV rejects it before validating
BROKEN = _tool("broken", {"type": "objekt"})               # fails its metaschema: sent anyway, listed as a problem
TOOLS = [WEATHER, OPT, PING, NOOP, BOOK, D4, ANY, NEVER]


def calls(*pairs: tuple[str, str]) -> list[dict]:
    return [{"name": n, "arguments": a} for n, a in pairs]


@dataclass
class Edge:
    """One scripted reply and its K2VV verdict worked out by hand: None = not a tool-call reply."""

    id: str
    reply: Callable[[], Reply]
    k2vv_valid: bool | None
    ours: tuple[str, ...] = ()  # our own per-call statuses, in order
    tools: tuple[dict, ...] = tuple(TOOLS)


EDGES = [
    Edge("ok", lambda: Reply(tool_calls=calls(("get_weather", '{"city": "Oslo"}'))), True, ("valid",)),
    Edge("bad_json", lambda: Reply(tool_calls=calls(("get_weather", '{"city": "Oslo"'))), False, ("not_json",)),
    Edge("empty_string_args", lambda: Reply(tool_calls=calls(("set_mode", ""))), False, ("valid",)),
    Edge("empty_parameters", lambda: Reply(tool_calls=calls(("ping", "{}"))), False, ("valid",)),
    Edge("missing_parameters", lambda: Reply(tool_calls=calls(("noop", "{}"))), False, ("valid",)),
    Edge("unknown_tool", lambda: Reply(tool_calls=calls(("launch", "{}"))), False, ("unknown_tool",)),
    Edge("tool_calls_finish_no_calls", lambda: Reply(content="Let me check.", finish_reason="tool_calls"), False),
    Edge("one_bad_of_two", lambda: Reply(tool_calls=calls(("get_weather", '{"city": "Oslo"}'),
                                                          ("get_weather", '{"city": 5}'))),
         False, ("valid", "schema_violation")),
    Edge("two_ok",
         lambda: Reply(tool_calls=calls(("get_weather", '{"city": "Oslo"}'), ("set_mode", '{"verbose": true}'))),
         True, ("valid", "valid")),
    Edge("bad_schema_tool", lambda: Reply(tool_calls=calls(("broken", "{}"))), False, ("tool_schema_invalid",),
         tools=(WEATHER, BROKEN)),
    Edge("bad_schema_offered_other_called", lambda: Reply(tool_calls=calls(("get_weather", '{"city": "Lima"}'))), True,
         ("valid",), tools=(WEATHER, BROKEN)),
    Edge("format_not_checked", lambda: Reply(tool_calls=calls(("book", '{"day": "not-a-date"}'))), True,
         ("schema_violation",)),
    Edge("draft4_ok", lambda: Reply(tool_calls=calls(("count", '{"n": 1}'))), True, ("valid",)),
    Edge("draft4_exclusive", lambda: Reply(tool_calls=calls(("count", '{"n": 0}'))), False, ("schema_violation",)),
    Edge("args_array", lambda: Reply(tool_calls=calls(("get_weather", "[1]"))), False, ("schema_violation",)),
    Edge("true_schema", lambda: Reply(tool_calls=calls(("anything", '{"x": 1}'))), True, ("valid",)),
    Edge("false_schema", lambda: Reply(tool_calls=calls(("never", "{}"))), False, ("schema_violation",)),
    Edge("additional_property", lambda: Reply(tool_calls=calls(("get_weather", '{"city": "Oslo", "x": 1}'))), False,
         ("schema_violation",)),
    Edge("whitespace_args", lambda: Reply(tool_calls=calls(("set_mode", ' {"verbose": false} '))), True, ("valid",)),
    Edge("stop_text", lambda: Reply.text("It is sunny."), None),
    Edge("stop_with_call", lambda: Reply(tool_calls=calls(("get_weather", '{"city": "Oslo"}')), finish_reason="stop"),
         None, ("valid",)),
    Edge("length_with_call", lambda: Reply(tool_calls=calls(("get_weather", '{"city": "Oslo"}')),
                                           finish_reason="length"), None, ("valid",)),
    Edge("http_400", lambda: Reply.error(400, "unsupported schema"), None),
]
BY_ID = {e.id: e for e in EDGES}


def respond(body: dict, ctx: RequestContext) -> Reply:
    return BY_ID[body["messages"][-1]["content"].removeprefix("edge:")].reply()


def write_suite(path: Path) -> Path:
    lines = [json.dumps({"messages": [{"role": "_input", "content": "You call tools."},
                                      {"role": "user", "content": f"edge:{e.id}"}],
                         "tools": list(e.tools), "_meta": {"id": e.id}}) for e in EDGES]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_unit_rule_on_the_edges() -> None:
    """The rule itself, call by call, without HTTP (the end-to-end test below checks the same through records)."""
    for e in EDGES:
        r = e.reply()
        if r.status != 200 or e.k2vv_valid is None:
            continue
        tcs = [ToolCall(index=i, name=c["name"], arguments=c["arguments"]) for i, c in enumerate(r.tool_calls or [])]
        assert k2vv_rule.reply_valid(tcs, list(e.tools)) is e.k2vv_valid, e.id
    # lookups K2VV's validator fails on: a malformed tool before the match, tools not a list, decoded arguments
    assert not k2vv_rule.call_valid("get_weather", '{"city": "x"}', [{"type": "function"}, WEATHER])
    assert k2vv_rule.call_valid("get_weather", '{"city": "x"}', [WEATHER, {"type": "function"}])
    assert not k2vv_rule.call_valid("get_weather", '{"city": "x"}', None)
    assert k2vv_rule.call_valid("get_weather", {"city": "x"}, [WEATHER])
    assert not k2vv_rule.call_valid("get_weather", "[" * 100_000, [WEATHER])  # too deep to parse: invalid, no crash


def _run(tmp_path: Path, srv_url: str, suite: Path, *extra: str) -> tuple[RunSummary, list[ExchangeRecord], Any]:
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--reference", f"ref={srv_url}", "--suite", str(suite), "--out", str(out),
                                   "--no-history", "--quiet", *extra], catch_exceptions=False)
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    recs = [ExchangeRecord.model_validate_json(x) for x in (out / "records.jsonl").read_text().splitlines()]
    return summary, recs, res


@pytest.mark.parametrize("variant", ["nonstream", "stream"])
def test_k2vv_counts_on_edge_replies_through_a_run(tmp_path: Path, scripted_server, variant: str) -> None:
    srv = scripted_server(respond)
    suite = write_suite(tmp_path / "edges.jsonl")
    summary, recs, res = _run(tmp_path, srv.base_url, suite, "--option", f"variants={variant}")
    assert res.exit_code == 0, res.output

    # the bad-schema lines were sent as written and are listed, not skipped
    sent_users = [b["messages"][-1]["content"] for _, _, b in srv.log if b]
    assert "edge:bad_schema_tool" in sent_users and "edge:bad_schema_offered_other_called" in sent_users
    problems = [(p.line, p.action) for p in summary.input_problems]
    lines = {e.id: i + 1 for i, e in enumerate(EDGES)}
    assert problems == [(lines["bad_schema_tool"], "sent"), (lines["bad_schema_offered_other_called"], "sent")]
    assert all("tools[1].function.parameters is not a valid JSON Schema" in p.message for p in summary.input_problems)
    assert summary.suites[0].skipped_lines == 0 and summary.suites[0].case_count == len(EDGES)
    assert "sent anyway" in res.output

    (r,) = summary.results
    tool_call_replies = [e for e in EDGES if e.k2vv_valid is not None]
    valid = [e for e in tool_call_replies if e.k2vv_valid]
    assert (len(tool_call_replies), len(valid)) == (19, 7)  # the hand count the rule gives
    assert r.counts["count_finish_reason_tool_calls"] == 19
    assert r.counts["count_successful_tool_call"] == 7
    k2 = r.metrics["k2vv_schema_accuracy"]
    assert k2.value == pytest.approx(7 / 19) and k2.n == 19 and k2.low < k2.value < k2.high
    assert r.extra["k2vv_summary"] == {
        "success_count": len(EDGES) - 1, "failure_count": 1, "finish_stop": 2, "finish_tool_calls": 19,
        "finish_others": 1, "finish_others_detail": {"length": 1}, "schema_validation_error_count": 12,
        "successful_tool_call_count": 7}

    # per record, the rule applied to what was recorded agrees with the hand verdict
    by_case = {rec.case_id: rec for rec in recs}
    for e in tool_call_replies:
        rec = by_case[e.id]
        assert rec.finish_reason == "tool_calls"
        assert k2vv_rule.record_valid(rec, list(e.tools)) is e.k2vv_valid, e.id

    # our own rule on the same replies: 22 calls, the one of the invalid-schema tool left out of the denominator
    statuses = [s for e in EDGES for s in e.ours]
    assert len(statuses) == r.counts["tool_calls"] == 22
    assert r.counts["schema_tool_schema_invalid"] == 1
    assert (r.counts["schema_not_json"], r.counts["schema_unknown_tool"], r.counts["schema_schema_violation"]) == (1,
                                                                                                                   1, 6)
    acc = r.metrics["schema_accuracy"]
    assert acc.n == 21 and acc.value == pytest.approx(statuses.count("valid") / 21) == pytest.approx(13 / 21)
    assert any("leave the 1 call(s) of those tools out" in n for n in r.notes)
    assert not any("skipped as bad input" in n for n in r.notes)


def test_strict_still_rejects_a_bad_schema_line(tmp_path: Path, scripted_server) -> None:
    srv = scripted_server(respond)
    suite = write_suite(tmp_path / "edges.jsonl")
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--reference", f"ref={srv.base_url}", "--suite", str(suite), "--out",
                                   str(out), "--no-history", "--quiet", "--strict"], catch_exceptions=False)
    line = next(i + 1 for i, e in enumerate(EDGES) if e.id == "bad_schema_tool")
    assert res.exit_code != 0
    assert f"edges.jsonl:{line}: tools[1].function.parameters is not a valid JSON Schema" in res.output


# Replies whose tool_calls entries the typed record has to normalise (null arguments, arguments sent as an object, a
# malformed entry): K2VV reads the body as sent, so the count must too. Non-streamed only (a raw body).
UNTYPED = _tool("lookup", {"properties": {"city": {"type": "string"}}})  # no "type": null passes it


def _raw(*entries: Any, finish: str = "tool_calls") -> Callable[[], Reply]:
    body = {"id": "chatcmpl-raw", "object": "chat.completion", "created": 0, "model": "scripted-model",
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": None, "tool_calls": list(entries)}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}
    return lambda: Reply(body=body)


def _fn(name: str, **kw: Any) -> dict:
    return {"id": "call_1", "type": "function", "function": {"name": name, **kw}}


RAW_EDGES = [
    Edge("null_arguments_untyped_schema", _raw(_fn("lookup", arguments=None)), True, tools=(UNTYPED,)),
    Edge("null_arguments_object_schema", _raw(_fn("get_weather", arguments=None)), False),
    Edge("object_arguments", _raw(_fn("get_weather", arguments={"city": "Oslo"})), True),
    Edge("malformed_entry_beside_valid_call", _raw("oops", _fn("get_weather", arguments='{"city": "Oslo"}')), False),
    Edge("entry_without_arguments_key", _raw(_fn("set_mode")), False),
    Edge("tool_calls_null", _raw(finish="tool_calls"), False),
]


def test_k2vv_counts_read_the_body_as_sent(tmp_path: Path, scripted_server) -> None:
    by_id = {e.id: e for e in RAW_EDGES}
    srv = scripted_server(lambda body, ctx: by_id[body["messages"][-1]["content"].removeprefix("edge:")].reply())
    suite = tmp_path / "raw.jsonl"
    suite.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"edge:{e.id}"}],
                                         "tools": list(e.tools), "_meta": {"id": e.id}}) + "\n" for e in RAW_EDGES))
    summary, recs, res = _run(tmp_path, srv.base_url, suite, "--no-stream")
    assert res.exit_code == 0, res.output
    (r,) = summary.results
    # our own metrics call the non-object entry a provider fault; K2VV's SDK reads that body as a completion
    assert {rec.case_id for rec in recs if not rec.ok} == {"malformed_entry_beside_valid_call"}
    assert all(k2vv_rule.answered(rec) and k2vv_rule.finish_reason(rec) == "tool_calls" for rec in recs)
    for rec in recs:
        assert k2vv_rule.record_valid(rec, list(by_id[rec.case_id].tools)) is by_id[rec.case_id].k2vv_valid, rec.case_id
    assert (r.counts["count_finish_reason_tool_calls"], r.counts["count_successful_tool_call"]) == (6, 2)


# Lines and replies where K2VV's client (the openai SDK plus its own stream reassembly) reads differently from ours.
WEATHER_INT = _tool("get_weather", {"type": "object", "properties": {"city": {"type": "integer"}},
                                    "required": ["city"]})


def _body(choices: Any) -> Callable[[], Reply]:
    return lambda: Reply(body={"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "scripted-model",
                               "choices": choices, "usage": {"prompt_tokens": 5, "completion_tokens": 5,
                                                             "total_tokens": 10}})


def _split_name_stream() -> Reply:
    """A streamed call whose name comes in two deltas: K2VV's reassembly keeps only the last piece ("weather")."""
    def chunk(delta: dict, finish: str | None = None) -> str:
        return json.dumps({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": "m",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    return Reply(raw_events=[
        chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                    "function": {"name": "get_", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]}),
        chunk({}, "tool_calls"),
        json.dumps({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}})])


# (id, tools, stream, reply, K2VV's verdict: "valid"/"invalid" tool-call reply, "stop", "no_finish", "dropped")
PEER_EDGES = [
    ("dup_first_matches", (WEATHER, WEATHER_INT), False,
     lambda: Reply(tool_calls=calls(("get_weather", '{"city": "Oslo"}'))), "valid"),
    ("dup_second_matches", (WEATHER, WEATHER_INT), False,
     lambda: Reply(tool_calls=calls(("get_weather", '{"city": 5}'))), "invalid"),
    ("choices_empty", (WEATHER,), False, _body([]), "no_finish"),
    ("message_null_tool_calls", (WEATHER,), False,
     _body([{"index": 0, "finish_reason": "tool_calls", "message": None}]), "dropped"),
    ("message_null_stop", (WEATHER,), False, _body([{"index": 0, "finish_reason": "stop", "message": None}]), "stop"),
    ("split_name", (WEATHER,), True, _split_name_stream, "invalid"),
    ("empty_stream", (WEATHER,), True, lambda: Reply(raw_events=[]), "stop"),  # only [DONE]: K2VV's "finish or stop"
]


def test_k2vv_counts_follow_k2vv_client_where_it_reads_differently(tmp_path: Path, scripted_server) -> None:
    by_id = {e[0]: e for e in PEER_EDGES}
    srv = scripted_server(lambda body, ctx: by_id[body["messages"][-1]["content"].removeprefix("edge:")][3]())
    suite = tmp_path / "peers.jsonl"  # K2VV format: no _meta, "stream" on the line
    suite.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"edge:{e[0]}"}],
                                         "tools": list(e[1]), "stream": e[2]}) + "\n" for e in PEER_EDGES))
    summary, every, res = _run(tmp_path, srv.base_url, suite)
    assert res.exit_code == 0, res.output
    # a suite under 50 cases: the reference answers each line twice; the second answers stay out of every count below
    recs = [rec for rec in every if not is_reference_repeat(rec)]
    assert len(every) - len(recs) == len(PEER_EDGES)

    # every planned line was sent, the two that offer a name twice as written, and listed
    sent = {b["messages"][-1]["content"].removeprefix("edge:"): b for _, _, b in srv.log if b}
    assert set(sent) == set(by_id)
    assert sent["dup_first_matches"]["tools"] == [WEATHER, WEATHER_INT]
    assert [(p.line, p.action) for p in summary.input_problems] == [(1, "sent"), (2, "sent")]
    assert all("'get_weather' is offered twice" in p.message for p in summary.input_problems)
    assert summary.suites[0].skipped_lines == 0 and len(recs) == len(PEER_EDGES)

    verdicts = [e[4] for e in PEER_EDGES]
    (r,) = summary.results
    assert r.extra["k2vv_summary"] == {
        "success_count": len(PEER_EDGES) - verdicts.count("dropped"), "failure_count": 0,
        "finish_stop": verdicts.count("stop"), "finish_tool_calls": 3, "finish_others": 0,
        "finish_others_detail": {}, "schema_validation_error_count": 2, "successful_tool_call_count": 1}
    assert (r.counts["count_finish_reason_tool_calls"], r.counts["count_successful_tool_call"]) == (3, 1)

    by_case = {int(rec.case_id[1:].split("-")[0]): rec for rec in recs}  # L<line>-<hash>
    split = by_case[6]
    assert split.tool_calls[0].name == "get_weather" and split.tool_calls[0].name_last_delta == "weather"
    assert "tool_call_name_split:0" in split.wire_issues
    assert not k2vv_rule.record_valid(split, [WEATHER])
    assert k2vv_rule.dropped(by_case[4]) and not any(k2vv_rule.dropped(by_case[i]) for i in (1, 2, 3, 5, 6))
    assert k2vv_rule.answered(by_case[3]) and k2vv_rule.finish_reason(by_case[3]) is None
    # ours differs on purpose: no choices / a null message are provider faults; the joined name is a valid call
    assert {i for i, rec in by_case.items() if not rec.ok} == {3, 4, 5, 7}
    assert k2vv_rule.answered(by_case[7]) and k2vv_rule.finish_reason(by_case[7]) == "stop"
    assert r.counts["tool_calls"] == 3 and r.counts.get("schema_schema_violation") == 1
    assert r.metrics["schema_accuracy"].n == 3 and r.metrics["schema_accuracy"].value == pytest.approx(2 / 3)
