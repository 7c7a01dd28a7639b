"""Tool-call scoring on hand-built records, with exact expected numbers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from verifier.kinds.toolcall.checks import args_bfcl_equal, args_exact_equal, check_call
from verifier.kinds.toolcall.scoring import score_toolcall
from verifier.kinds.toolcall.suite_format import ToolcallCase, parse_case
from verifier.records import ExchangeRecord, ToolCall

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city"], "additionalProperties": False}}}


def case(cid: str, expected: dict | None, text: str = "weather?") -> ToolcallCase:
    body = {"messages": [{"role": "user", "content": text}], "tools": [WEATHER],
            "_meta": {"id": cid, "expected": expected}}
    return parse_case(body, "mem", None)


def call(city: Any) -> dict:
    return {"tool": "get_weather", "arguments": {"city": city}}


def rec(ep: str, cid: str, *, args: str | None = None, name: str = "get_weather", text: str | None = None,
        error: str | None = None, latency: float = 1.0, variant: str | None = None, repeat: int = 0,
        attempts: int = 1, wire: tuple[str, ...] = ()) -> ExchangeRecord:
    calls = [ToolCall(index=0, id="call_1", name=name, arguments=args)] if args is not None else []
    return ExchangeRecord(
        request_hash="h", kind="toolcall", suite="s", case_id=cid, endpoint=ep, variant=variant, repeat=repeat,
        status=500 if error else 200, error_class=error, attempts=attempts, latency_s=latency,
        finish_reason=None if error else ("tool_calls" if calls else "stop"), tool_calls=calls, content=text,
        wire_issues=list(wire), stream=variant == "stream",
    )


CASES = [case("c1", call("Oslo")), case("c2", None), case("c3", call("Lima")), case("c4", None),
         case("c5", call("Quito")), case("c6", None)]
REF = [rec("ref", "c1", args='{"city": "Oslo"}', latency=1), rec("ref", "c2", text="hi", latency=2),
       rec("ref", "c3", args='{"city":"Lima"}', latency=3), rec("ref", "c4", text="no", latency=4),
       rec("ref", "c5", args='{"city":"Quito"}', latency=5), rec("ref", "c6", text="ok", latency=6)]
CAND = [rec("cand", "c1", args='{"city": "oslo"}', wire=("tool_call_missing_id:0",)),
        rec("cand", "c2", args='{"city": "x"'),           # FP trigger, arguments not JSON
        rec("cand", "c3", text="I cannot"),               # FN trigger
        rec("cand", "c4", text="fine"),                   # TN
        rec("cand", "c5", args='{"city": 5}'),            # schema violation, names agree
        rec("cand", "c6", error="server_error", attempts=5)]


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    out = score_toolcall("s", CASES, REF + CAND, "ref", ["ref", "cand"])
    return {r.endpoint: r for r in out}


def test_trigger_counts_and_rates(results: dict[str, Any]) -> None:
    c = results["cand"]
    assert (c.counts["trigger_tp"], c.counts["trigger_fp"], c.counts["trigger_fn"], c.counts["trigger_tn"]) == (2, 1,
                                                                                                                1, 1)
    assert c.metrics["trigger_precision"].value == pytest.approx(2 / 3) and c.metrics["trigger_precision"].n == 3
    assert c.metrics["trigger_recall"].value == pytest.approx(2 / 3)
    f1 = c.metrics["trigger_f1"]
    assert f1.value == pytest.approx(2 / 3) and f1.n == 5 and f1.low < f1.value < f1.high
    assert "trigger_f1" not in results["ref"].metrics  # the reference is not scored against itself


def test_schema_accuracy_and_failure_kinds(results: dict[str, Any]) -> None:
    c = results["cand"]
    assert c.metrics["schema_accuracy"].value == pytest.approx(1 / 3) and c.metrics["schema_accuracy"].n == 3
    assert (c.counts["schema_not_json"], c.counts["schema_schema_violation"], c.counts["schema_unknown_tool"]) == (1,
                                                                                                                   1, 0)
    r = results["ref"]
    assert r.metrics["schema_accuracy"].value == 1.0 and r.metrics["schema_accuracy"].n == 3
    assert c.metrics["k2vv_schema_accuracy"].value == pytest.approx(1 / 3)
    assert (c.counts["count_finish_reason_tool_calls"], c.counts["count_successful_tool_call"]) == (3, 1)


def test_agreement_exact_vs_bfcl(results: dict[str, Any]) -> None:
    c = results["cand"]
    assert c.metrics["tool_name_agreement"].value == 1.0 and c.metrics["tool_name_agreement"].n == 2
    assert c.metrics["args_exact_agreement"].value == 0.0
    assert c.metrics["args_bfcl_agreement"].value == 0.5


def test_errors_retries_wire(results: dict[str, Any]) -> None:
    c = results["cand"]
    assert c.metrics["error_rate"].value == pytest.approx(1 / 6) and c.metrics["error_rate"].n == 6
    assert c.counts["error:server_error"] == 1 and c.counts["retries"] == 4 and c.counts["retried_exchanges"] == 1
    assert c.counts["wire:tool_call_missing_id"] == 1
    assert results["ref"].metrics["latency_p50_s"].value == pytest.approx(3.5)
    assert results["ref"].metrics["latency_p50_s"].n == 6


def test_expected_metrics_and_paired_comparison(results: dict[str, Any]) -> None:
    c, r = results["cand"], results["ref"]
    assert r.metrics["expected_case_accuracy"].value == 1.0 and r.metrics["expected_case_accuracy"].n == 6
    assert c.metrics["expected_case_accuracy"].value == pytest.approx(2 / 5)  # c1 (BFCL-equal) and c4; c6 errored
    assert r.metrics["expected_trigger_f1"].value == 1.0
    assert c.metrics["expected_args_exact"].value == 0.0
    assert c.metrics["expected_args_bfcl"].value == pytest.approx(1 / 3)
    comp = c.comparisons["expected_case_accuracy"]
    assert comp.difference.value == pytest.approx(-4 / 6)  # paired on all 6 cases; the errored one counts as wrong
    assert comp.p_value == pytest.approx(2 * 0.5**4) and comp.test == "mcnemar"
    assert comp.difference.low < comp.difference.value < comp.difference.high


def test_disagreements_list_untrusted_text_with_detail(results: dict[str, Any]) -> None:
    c = results["cand"]
    kinds = sorted((d.case_id, d.kind) for d in c.disagreements)
    assert kinds == [("c2", "schema"), ("c3", "trigger"), ("c5", "schema")]
    c5 = next(d for d in c.disagreements if d.case_id == "c5")
    assert "schema_violation" in c5.detail and "city" in c5.detail and c5.request_excerpt == "weather?"
    assert c.counts["disagreements_total"] == 3


def test_results_do_not_depend_on_the_order_answers_came_back_in() -> None:
    """Records are appended as answers arrive, so their order follows the run's timing (concurrency, batching):
    the same answers in another order must score the same, disagreement list order included."""
    answered_in_order = score_toolcall("s", CASES, REF + CAND, "ref", ["ref", "cand"])
    shuffled = list(reversed(REF)) + [CAND[i] for i in (4, 1, 5, 0, 3, 2)]
    answered_shuffled = score_toolcall("s", CASES, shuffled, "ref", ["ref", "cand"])
    assert [r.model_dump() for r in answered_shuffled] == [r.model_dump() for r in answered_in_order]
    listed = [d.case_id for d in answered_shuffled[1].disagreements]
    assert listed == sorted(listed, key=lambda cid: [c.id for c in CASES].index(cid))


def test_stream_vs_nonstream_side_by_side() -> None:
    cases = [case("a", call("Oslo")), case("b", call("Lima"))]
    recs = [rec("ref", "a", args='{"city":"Oslo"}', variant="nonstream"),
            rec("ref", "a", args='{"city":"Os', variant="stream"),
            rec("ref", "b", args='{"city":"Lima"}', variant="nonstream"), rec("ref", "b", args='{"city":"Lima"}',
                                                                              variant="stream")]
    (r,) = score_toolcall("s", cases, recs, "ref", ["ref"])
    assert r.metrics["schema_accuracy_nonstream"].value == 1.0
    assert r.metrics["schema_accuracy_stream"].value == 0.5
    comp = r.comparisons["stream_vs_nonstream_valid"]
    assert comp.difference.value == pytest.approx(-0.5) and comp.difference.n == 2 and comp.p_value == 1.0


def test_repeats_report_run_to_run_spread() -> None:
    cases = [case("a", call("Oslo")), case("b", None)]
    recs = [rec("ref", "a", args='{"city":"Oslo"}', repeat=0), rec("ref", "a", args='{"city":"Oslo"}', repeat=1),
            rec("ref", "b", text="x", repeat=0), rec("ref", "b", args='{"city":"Oslo"}', repeat=1)]
    (r,) = score_toolcall("s", cases, recs, "ref", ["ref"])
    assert r.metrics["repeat_consistency"].value == 0.5 and r.metrics["repeat_consistency"].n == 2
    assert r.metrics["repeat_trigger_consistency"].value == 0.5
    # repeat 1 against repeat 0: TP on a, FP on b -> F1 = 2/3
    assert r.metrics["repeat_trigger_f1"].value == pytest.approx(2 / 3)
    (series,) = [s for s in r.series if s.name == "expected_case_accuracy_by_repeat"]
    assert series.x == [0.0, 1.0] and series.y == [1.0, 0.5]


def test_f1_interval_is_not_degenerate_when_perfect() -> None:
    from verifier.kinds.toolcall.scoring import f1_interval

    iv = f1_interval([True] * 40, [False] * 40, [False] * 40, list(range(40)))
    j_low = 40 / (40 + 1.959964**2)  # Wilson lower bound at k = n = 40; F1 = 2J/(1+J)
    assert iv.value == 1.0 and iv.high == 1.0 and iv.low == pytest.approx(2 * j_low / (1 + j_low), abs=1e-6)


def test_check_call_statuses() -> None:
    tools = {"get_weather": WEATHER["function"]["parameters"]}
    assert check_call("get_weather", '{"city": "Oslo"}', tools).valid
    assert check_call("get_weather", "", tools).status == "schema_violation"  # empty = {} and city is required
    assert check_call("get_time", "{}", tools).status == "unknown_tool"
    assert check_call("get_weather", "[1]", tools).status == "schema_violation"
    assert check_call("get_weather", '{"city": "Oslo", "unit": "k"}', tools).error.startswith("unit:")
    date_tool = {"d": {"type": "object", "properties": {"x": {"type": "string", "format": "date"}}}}
    assert check_call("d", '{"x": "2026-02-30"}', date_tool).status == "schema_violation"
    assert check_call("d", '{"x": "2026-02-28"}', date_tool).valid


def test_argument_equivalences() -> None:
    assert args_bfcl_equal({"a": 1, "s": "New York!"}, {"a": 1.0, "s": "new york"})
    assert not args_exact_equal({"a": 1}, {"a": 1.0})
    assert not args_bfcl_equal({"a": True}, {"a": 1})
    assert not args_bfcl_equal({"a": [1, 2]}, {"a": [2, 1]})
    assert not args_bfcl_equal({"a": 1}, {"a": 1, "b": None})
    assert args_exact_equal(json.loads('{"b": 1, "a": [1]}'), {"a": [1], "b": 1})


def test_comparisons_with_repeats_use_cluster_robust_test() -> None:
    cases = [case(f"k{i}", call("Oslo")) for i in range(6)]
    recs = []
    for i in range(6):
        for rep in (0, 1):
            recs.append(rec("ref", f"k{i}", args='{"city":"Oslo"}', repeat=rep))
            bad = i < 3  # the candidate breaks the same 3 cases on both repeats
            recs.append(rec("cand", f"k{i}", args='{"city": 1}' if bad else '{"city":"Oslo"}', repeat=rep))
    res = {r.endpoint: r for r in score_toolcall("s", cases, recs, "ref", ["ref", "cand"])}
    comp = res["cand"].comparisons["expected_case_accuracy"]
    assert comp.test == "cluster_robust" and comp.difference.n == 12 and comp.independent_units == 6
    assert comp.difference.value == pytest.approx(-0.5)
    # d per case = -1 (3 cases) or 0 (3 cases), each twice: CR1 se = sqrt(6/5 * 6 * 1 / 144) = 0.22361, df 5
    assert comp.difference.high - comp.difference.value == pytest.approx(2.570582 * 0.2236068, abs=1e-5)


def test_records_with_arguments_nested_past_the_parser_score_as_one_invalid_call() -> None:
    """A record stored before the client refused deep arguments (an old run folder, a resumed one): scoring the
    suite must not raise RecursionError (which emptied every endpoint's results); the call is not JSON, the rest of
    the suite is scored as usual, and K2VV's rule counts it invalid."""
    deep = "[" * 1500 + "]" * 1500
    shallow = '{"city": ' + "[" * 50 + '"Oslo"' + "]" * 50 + "}"
    cand = [rec("cand", "c1", args=deep), rec("cand", "c3", args='{"city":"Lima"}'), rec("cand", "c5", args=shallow)]
    out = {r.endpoint: r for r in score_toolcall("s", CASES, REF + cand, "ref", ["ref", "cand"])}
    res = out["cand"]
    assert res.counts["schema_not_json"] == 1 and res.counts["schema_schema_violation"] == 1
    assert res.metrics["schema_accuracy"].n == 3 and res.metrics["schema_accuracy"].value == pytest.approx(1 / 3)
    assert res.extra["k2vv_summary"]["successful_tool_call_count"] == 1
    assert check_call("get_weather", deep, {"get_weather": WEATHER["function"]["parameters"]}).error == \
        "arguments nest deeper than 100 levels"


def test_schema_comparison_is_per_call_with_an_exact_swap_test_over_cases() -> None:
    """The same records as above: per call, 6 of 12 candidate calls invalid; the exact randomization test swaps
    the endpoints within the 3 cases that differ: 2 of the 8 swaps are as extreme, p = 0.25."""
    cases = [case(f"k{i}", call("Oslo")) for i in range(6)]
    recs = [rec(ep, f"k{i}", args='{"city": 1}' if ep == "cand" and i < 3 else '{"city":"Oslo"}', repeat=rep)
            for i in range(6) for rep in (0, 1) for ep in ("ref", "cand")]
    comp = {r.endpoint: r for r in score_toolcall("s", cases, recs, "ref", ["ref", "cand"])}["cand"].comparisons[
        "schema_accuracy"]
    assert comp.test == "cluster_swap_exact" and comp.p_value == pytest.approx(0.25)
    assert comp.difference.value == pytest.approx(-0.5) and comp.difference.n == 12
    assert comp.independent_units == 6 and comp.unit is not None and comp.unit.startswith("tool calls")
    assert comp.difference.low < -0.5 < comp.difference.high
