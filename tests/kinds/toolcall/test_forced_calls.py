"""``forced_call_success``: with tool_choice "required" or a named function, a reply without a call is a failure.

A real run (`verifier run`) against two scripted loopback servers: the reference always makes the forced call;
the candidate answers some forced cases with text, one with the wrong tool and one with invalid arguments.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.run.summary import RunSummary
from verifier.testing import Reply, RequestContext, schema_responder

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}
NAMED = {"type": "function", "function": {"name": "get_time"}}

# case id -> tool_choice; 6 "required", 6 named, 4 auto (auto cases are not forced and must not count)
CHOICES = {**{f"req{i}": "required" for i in range(6)}, **{f"named{i}": NAMED for i in range(6)},
           **{f"auto{i}": "auto" for i in range(4)}}
NO_CALL = {"req0", "req1", "named0"}  # the candidate answers these with text
WRONG_TOOL = "named1"  # the candidate calls get_weather though get_time is forced
BAD_ARGS = "req2"  # the candidate's call lacks the required argument


def candidate(body: dict, ctx: RequestContext) -> Reply:
    cid = body["messages"][-1]["content"]
    if cid in NO_CALL:
        return Reply.text("I would rather answer in words.")
    if cid == WRONG_TOOL:
        return Reply.tool_call("get_weather", {"city": "Oslo"})
    if cid == BAD_ARGS:
        return Reply.tool_call("get_weather", {})
    return schema_responder(body, ctx)


def test_forced_call_success_counts_calls_that_never_come(tmp_path: Path, scripted_server) -> None:
    ref, cand = scripted_server(schema_responder), scripted_server(candidate)
    suite = tmp_path / "forced.jsonl"
    suite.write_text("".join(json.dumps({"messages": [{"role": "user", "content": cid}], "tools": [WEATHER, TIME],
                                         "tool_choice": choice, "_meta": {"id": cid}}) + "\n"
                             for cid, choice in CHOICES.items()))
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--reference", f"ref={ref.base_url}", "--endpoint", f"cand={cand.base_url}",
                                   "--suite", str(suite), "--out", str(out), "--no-history", "--quiet"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    r_ref, r_cand = summary.result("ref", "forced"), summary.result("cand", "forced")

    assert r_ref.metrics["forced_call_success"].value == 1.0 and r_ref.metrics["forced_call_success"].n == 12
    fc = r_cand.metrics["forced_call_success"]
    assert fc.n == 12 and fc.value == pytest.approx(7 / 12) and fc.method == "wilson"
    assert fc.low < 7 / 12 < fc.high
    assert (r_cand.counts["forced:no_call"], r_cand.counts["forced:wrong_tool"], r_cand.counts["forced:invalid_call"]) \
        == (3, 1, 1)
    assert r_cand.counts["forced_exchanges"] == 12 and r_cand.counts["forced_errors"] == 0
    # the three replies without a call never reach schema_accuracy, which is why this metric exists
    assert r_cand.metrics["schema_accuracy"].n == r_ref.metrics["schema_accuracy"].n - 3

    comp = r_cand.comparisons["forced_call_success"]
    assert comp.difference.value == pytest.approx(7 / 12 - 1) and comp.difference.n == 12
    assert comp.test == "mcnemar" and comp.p_value == pytest.approx(2 * 0.5 ** 5)  # 5 discordant pairs, all one way
    assert comp.difference.low < comp.difference.value < comp.difference.high < 0

    assert "Forced-call success" in (out / "report.html").read_text(encoding="utf-8")


def test_forced_cases_with_an_invalid_schema_are_left_out_unless_no_call_came() -> None:
    """A call of a tool whose own schema is invalid cannot be judged; a missing call is a failure regardless."""
    from verifier.kinds.toolcall.scoring import score_toolcall
    from verifier.kinds.toolcall.suite_format import parse_case
    from verifier.records import ExchangeRecord, ToolCall

    broken = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "objekt"}}}

    def case(cid: str, choice: object) -> object:
        return parse_case({"messages": [{"role": "user", "content": cid}], "tools": [WEATHER, broken],
                           "tool_choice": choice, "_meta": {"id": cid}}, "mem", None, keep_bad_schemas=True)

    def rec(cid: str, *calls: tuple[str, str]) -> ExchangeRecord:
        return ExchangeRecord(request_hash="h", kind="toolcall", suite="s", case_id=cid, endpoint="ref", status=200,
                              finish_reason="tool_calls" if calls else "stop", content=None if calls else "no",
                              tool_calls=[ToolCall(index=i, name=n, arguments=a) for i, (n, a) in enumerate(calls)])

    cases = [case("a", NAMED), case("b", NAMED), case("c", "required"), case("d", "auto")]
    recs = [rec("a", ("get_time", "{}")), rec("b"), rec("c", ("get_weather", '{"city": "Oslo"}')),
            rec("d", ("get_weather", "{}"))]
    (r,) = score_toolcall("s", cases, recs, "ref", ["ref"])
    fc = r.metrics["forced_call_success"]
    assert (fc.value, fc.n) == (0.5, 2)  # a left out (unjudged); b failed without a call; c succeeded; d not forced
    assert r.counts["forced_unjudged"] == 1 and r.counts["forced:no_call"] == 1 and r.counts["forced_exchanges"] == 3
    (unforced,) = score_toolcall("s", cases[3:], recs[3:], "ref", ["ref"])
    assert "forced_call_success" not in unforced.metrics  # not measured is absent, never 0
