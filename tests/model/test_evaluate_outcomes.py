"""The evaluation's failure breakdown: each reply lands in exactly one outcome, per kind of case."""

from __future__ import annotations

from training.evaluate import CaseResult, failure_breakdown
from verifier.kinds.toolcall.suite_format import ExpectedCall, ToolcallCase


def _case(case_id: str, tags: list[str], tool: str | None) -> ToolcallCase:
    expected = ExpectedCall(tool=tool, arguments={}) if tool else None
    return ToolcallCase(id=case_id, body={"messages": []}, tags=tags, has_expected=True, expected=expected)


def test_every_reply_gets_the_first_thing_that_went_wrong() -> None:
    cases = [
        _case("a", ["tool"], "get_forecast"), _case("b", ["tool"], "get_forecast"),
        _case("c", ["tool"], "get_forecast"), _case("d", ["tool"], "get_forecast"),
        _case("e", ["tool"], "get_forecast"), _case("f", ["no_tool", "no_tool:chat"], None),
        _case("g", ["no_tool", "no_tool:unavailable"], None), _case("h", ["no_tool", "no_tool:unavailable"], None),
        _case("i", ["tool"], "get_forecast"),
    ]
    results = [
        CaseResult("a", "get_forecast", True, name="get_forecast", valid=True, args_match=True),
        CaseResult("b", "get_forecast", True, name="get_weather", valid=True),
        CaseResult("c", "get_forecast", True, name="get_forecast", valid=False, args_match=False),
        CaseResult("d", "get_forecast", True, name="get_forecast", valid=True, args_match=False),
        CaseResult("e", "get_forecast", False, content="Sure."),
        CaseResult("f", None, False, content="Hi."),
        CaseResult("g", None, True, name="get_forecast", valid=True),
        CaseResult("h", None, False, content="No tool for that."),
        CaseResult("i", "get_forecast", False, error="ReadTimeout: timed out"),
    ]
    assert failure_breakdown(results, cases) == {
        "chat": {"correct": 1},
        "tool": {"call_missed": 1, "correct": 1, "invalid_arguments": 1, "transport_error": 1,
                 "wrong_argument_values": 1, "wrong_tool": 1},
        "unavailable": {"correct": 1, "unwanted_call": 1},
    }
    assert sum(r.correct for r in results) == sum(r.outcome == "correct" for r in results)


def test_two_evaluations_compare_pair_by_pair() -> None:
    from training.compare import compare_variant, paired_cases

    base = {"a": "correct", "b": "unwanted_call", "c": "wrong_tool", "d": "correct", "gone": "correct"}
    cand = {"a": "correct", "b": "correct", "c": "correct", "d": "call_missed", "new": "correct"}
    a, b, moves = paired_cases(base, cand)
    assert (sum(a), sum(b), len(a)) == (2, 3, 4)  # only the cases both runs scored
    assert moves == {("unwanted_call", "correct"): 1, ("wrong_tool", "correct"): 1, ("correct", "call_missed"): 1}
    lines = compare_variant({"case_outcomes": base, "agent_runs": [{"scenario": "s", "success": False}]},
                            {"case_outcomes": cand, "agent_runs": [{"scenario": "s", "success": True}]})
    assert lines[0].startswith("case accuracy 2/4 -> 3/4: +25.0 pts")
    assert lines[-1] == "agent success 0/1 -> 1/1, McNemar p 1"


def test_training_like_cases_are_worded_from_the_training_templates() -> None:
    from suites.toolcall.catalog import generate_cases
    from training.evaluate import training_like_cases
    from training.phrasings import TRAIN_PHRASINGS

    cases = training_like_cases(40)
    train = [b["messages"][-1]["content"] for b, _ in generate_cases(4242, 40, TRAIN_PHRASINGS, no_tool_share=0.3)]
    assert [c.body["messages"][-1]["content"] for c in cases] == train
    no_tool = [c for c in cases if c.expected is None]
    assert 0 < len(no_tool) < 40 and all(c.has_expected for c in cases)
    assert all(c.expected.tool in c.tools() for c in cases if c.expected)
