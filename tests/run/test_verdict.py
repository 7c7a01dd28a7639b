"""The verdict rule on hand-built per-suite results: each branch of docs/verdict.md, the policy table, the gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.fixtures import make_summary
from verifier.history.gate import (
    DEFAULT_POLICY,
    PolicyError,
    evaluate,
    load_policy,
    parse_policy,
    to_junit,
)
from verifier.records import Interval
from verifier.run.summary import Comparison, EndpointSuiteResult, RunSummary
from verifier.run.verdict import VerdictPolicy, compute_verdicts, verdict_for

REPO = Path(__file__).resolve().parents[2]


def _tc(endpoint: str, schema_diff: Interval, p: float, f1: Interval | None = None) -> EndpointSuiteResult:
    r = EndpointSuiteResult(endpoint=endpoint, suite="tc", kind="toolcall")
    r.metrics["trigger_f1"] = f1 or Interval(value=1.0, low=0.99, high=1.0, n=400)
    r.comparisons["schema_accuracy"] = Comparison(metric="schema_accuracy", difference=schema_diff, p_value=p,
                                                  test="mcnemar")
    r.comparisons["trigger_rate"] = Comparison(metric="trigger_rate",
                                               difference=Interval(value=0.0, low=-0.01, high=0.01,
                                                                                          n=400), p_value=1.0,
                                               test="mcnemar")
    return r


def _lp(endpoint: str, kl: float, fingerprint: dict) -> EndpointSuiteResult:
    r = EndpointSuiteResult(endpoint=endpoint, suite="lp", kind="logprob")
    r.metrics["kl_mean"] = Interval(value=kl, low=kl * 0.8, high=kl * 1.2, n=900)
    r.extra["fingerprint"] = fingerprint
    return r


def test_significant_difference_says_differs_with_a_pasteable_headline() -> None:
    v = verdict_for("cand", [_tc("cand", Interval(value=-0.098, low=-0.13, high=-0.07, n=400), 1e-6)], [], "ref")
    assert v.status == "differs"
    assert v.headline == "cand differs from ref: schema accuracy -9.8 pts [-13.0, -7.0]"
    e = next(e for e in v.evidence if e.metric == "schema_accuracy")
    assert e.significant and e.p_holm == pytest.approx(2e-6)  # Holm over the two tested headline metrics


def test_small_difference_inside_margin_is_consistent() -> None:
    v = verdict_for("cand", [_tc("cand", Interval(value=0.002, low=-0.01, high=0.014, n=400), 0.8)], [], "ref")
    assert v.status == "consistent", v.headline
    assert "within ±5 pts" in v.headline


def test_wide_interval_is_inconclusive_with_cases_to_settle() -> None:
    v = verdict_for("cand", [_tc("cand", Interval(value=-0.01, low=-0.09, high=0.07, n=60), 0.7)], [], "ref")
    assert v.status == "inconclusive"
    assert v.cases_to_settle is not None and v.cases_to_settle > 60
    assert f"about {v.cases_to_settle} more cases" in v.headline
    # with that many more cases and the same difference, the interval's half-width shrinks under margin - |d|
    se = 0.16 / (2 * 1.959964) * (60 / (60 + v.cases_to_settle)) ** 0.5
    assert 1.6449 * se <= 0.05 - 0.01 + 1e-9


def test_fingerprint_with_margin_says_differs_without_margin_does_not() -> None:
    ok_tc = _tc("cand", Interval(value=0.0, low=-0.01, high=0.01, n=400), 1.0)
    named = {"verdict": "int4-decode", "distance": 0.2, "ranking": [("int4-decode", 0.2), ("bf16", 3.1)],
             "indistinguishable_from": []}
    v = verdict_for("cand", [ok_tc, _lp("cand", 0.02, named)], [], "ref")
    assert v.status == "differs"
    assert v.headline.endswith("KL profile closest to int4-decode (mean KL 0.02 nats [0.016, 0.024])")
    close = {**named, "ranking": [("int4-decode", 0.2), ("bf16", 0.25)]}
    assert verdict_for("cand", [ok_tc, _lp("cand", 0.02, close)], [], "ref").status == "inconclusive"
    same = {"verdict": "bf16", "distance": 0.0, "ranking": [("bf16", 0.0), ("fp8-kv", 2.0)]}
    assert verdict_for("cand", [ok_tc, _lp("cand", 1e-9, same)], [], "ref").status == "consistent"


def test_forced_call_success_without_comparison_uses_an_unpaired_test() -> None:
    cand = EndpointSuiteResult(endpoint="cand", suite="tc", kind="toolcall")
    ref = EndpointSuiteResult(endpoint="ref", suite="tc", kind="toolcall")
    cand.metrics["forced_call_success"] = Interval(value=0.70, low=0.64, high=0.76, n=200)
    ref.metrics["forced_call_success"] = Interval(value=0.95, low=0.91, high=0.97, n=200)
    v = verdict_for("cand", [cand], [ref], "ref")
    e = v.evidence[0]
    assert e.metric == "forced_call_success" and e.test == "fisher_exact"
    assert e.difference.value == pytest.approx(-0.25) and e.difference.low < -0.25 < e.difference.high
    assert v.status == "differs" and "forced-call success -25.0 pts" in v.headline


def test_no_headline_metric_is_inconclusive() -> None:
    v = verdict_for("cand", [EndpointSuiteResult(endpoint="cand", suite="c", kind="cache")], [], "ref")
    assert v.status == "inconclusive" and "no headline metric" in v.headline


def test_summary_roundtrip_and_every_candidate_judged() -> None:
    summary, _ = make_summary()
    summary.verdicts = compute_verdicts(summary)
    assert set(summary.verdicts) == {"fp8-kv", "int4-decode"}
    again = RunSummary.model_validate_json(summary.model_dump_json())
    assert again.verdicts == summary.verdicts and again.schema_version == "1.1"
    old = summary.model_dump(mode="json")
    old.pop("verdicts")
    old["schema_version"] = "1.0"
    assert RunSummary.model_validate(old).verdicts == {}  # 1.0 summaries still load


def test_policy_verdict_table_matches_default_and_gates() -> None:
    p = load_policy(REPO / "examples" / "policy.toml")
    assert p.verdict == DEFAULT_POLICY.verdict == VerdictPolicy(fail_on=["differs"], warn_on=["inconclusive"])
    summary, _ = make_summary()
    checks = [c for c in evaluate(summary, p).checks if c.name == "verdict"]
    verdicts = compute_verdicts(summary, p.verdict)
    assert {c.endpoint: c.status for c in checks} == {
        e: {"differs": "fail", "inconclusive": "warn", "consistent": "pass"}[v.status] for e, v in verdicts.items()}
    assert all(c.message.startswith(verdicts[c.endpoint].status + ": ") for c in checks)
    assert not [c for c in evaluate(summary, parse_policy({"thresholds": {}})).checks if c.name == "verdict"]
    junit = to_junit(evaluate(summary, p))
    assert '<testcase classname="int4-decode" name="verdict" time="0">' in junit
    assert '<failure message="differs: int4-decode differs from ref: schema accuracy' in junit
    assert 'type="verdict"' in junit


@pytest.mark.parametrize("table, message", [
    ({"margins": {"latency_p50_s": 0.1}}, "[verdict.margins].latency_p50_s: not a headline metric"),
    ({"margins": {"kl_mean": 0}}, "[verdict.margins].kl_mean: margin must be positive"),
    ({"fail_on": ["bad"]}, "[verdict].fail_on: unknown status 'bad'"),
    ({"alpha": 2}, "[verdict].alpha: Input should be less than 0.5"),
])
def test_bad_verdict_table_is_one_line_error(table: dict, message: str) -> None:
    with pytest.raises(PolicyError) as exc:
        parse_policy({"verdict": table}, "p.toml")
    assert str(exc.value).startswith("p.toml: ") and message in str(exc.value) and "\n" not in str(exc.value)
