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
from verifier.kinds.logprob.cluster_ci import MIN_CLUSTERS
from verifier.records import Interval
from verifier.run.summary import Comparison, EndpointSuiteResult, RunSummary
from verifier.run.verdict import VerdictPolicy, compute_verdicts, verdict_for

REPO = Path(__file__).resolve().parents[2]


def _tc(endpoint: str, schema_diff: Interval, p: float, f1: Interval | None = None) -> EndpointSuiteResult:
    r = EndpointSuiteResult(endpoint=endpoint, suite="tc", kind="toolcall")
    r.metrics["trigger_f1"] = f1 or Interval(value=0.97, low=0.95, high=0.98, n=400)
    r.comparisons["schema_accuracy"] = Comparison(metric="schema_accuracy", difference=schema_diff, p_value=p,
                                                  test="mcnemar", unit="calls both endpoints made")
    r.comparisons["trigger_f1"] = Comparison(metric="trigger_f1", p_value=0.8, test="paired_bootstrap", unit="cases",
                                             difference=Interval(value=0.0, low=-0.02, high=0.02, n=400))
    return r


def _lp(endpoint: str, kl: float, fingerprint: dict, method: str = "sampled_k3") -> EndpointSuiteResult:
    r = EndpointSuiteResult(endpoint=endpoint, suite="lp", kind="logprob")
    r.metrics["kl_mean"] = Interval(value=kl, low=kl * 0.8, high=kl * 1.2, n=40, method=method)
    r.extra["fingerprint"] = fingerprint
    return r


def _agent(diff: Interval, scenarios: int, p: float | None) -> EndpointSuiteResult:
    r = EndpointSuiteResult(endpoint="cand", suite="ag", kind="agent")
    r.comparisons["task_success"] = Comparison(metric="task_success", difference=diff, p_value=p, test="sign_test",
                                               unit="trials, clustered by scenario", independent_units=scenarios)
    return r


def test_difference_beyond_the_margin_says_differs_with_a_pasteable_headline() -> None:
    v = verdict_for("cand", [_tc("cand", Interval(value=-0.098, low=-0.13, high=-0.07, n=400), 1e-6)], [], "ref")
    assert v.status == "differs"
    assert v.headline == "cand differs from ref: schema accuracy per call -9.8 pts [-13.0, -7.0] of 400 calls"
    e = next(e for e in v.evidence if e.metric == "schema_accuracy")
    assert e.significant and e.status == "differs" and e.p_outside is not None and e.p_holm is not None
    assert e.p_outside < e.p_holm <= 2 * e.p_outside  # Holm over the two margin tests (trigger F1, schema)


def test_small_significant_difference_inside_the_margin_is_not_differs() -> None:
    """A 2-point per-call drop on 2,000 calls: the point null is rejected, but it is shown inside ±5 points."""
    v = verdict_for("cand", [_tc("cand", Interval(value=-0.02, low=-0.028, high=-0.012, n=2000), 1e-9)], [], "ref")
    assert v.status == "consistent", v.headline
    assert "schema accuracy per call -2.0 pts [-2.8, -1.2] of 2000 calls within ±5 pts" in v.headline


def test_material_metric_differs_on_any_significant_difference() -> None:
    cand = EndpointSuiteResult(endpoint="cand", suite="tc", kind="toolcall")
    cand.comparisons["forced_call_success"] = Comparison(
        metric="forced_call_success", difference=Interval(value=-0.02, low=-0.03, high=-0.011, n=2000),
        p_value=1e-5, test="mcnemar", unit="forced cases")
    v = verdict_for("cand", [cand], [], "ref")
    assert v.status == "differs" and "metric marked material" in v.headline
    assert verdict_for("cand", [cand], [], "ref", VerdictPolicy(material=[])).status == "consistent"


def test_wide_interval_is_inconclusive_with_cases_to_settle_and_a_peeking_warning() -> None:
    v = verdict_for("cand", [_tc("cand", Interval(value=-0.01, low=-0.09, high=0.07, n=60), 0.7)], [], "ref")
    assert v.status == "inconclusive"
    assert v.cases_to_settle is not None and v.cases_to_settle > 60
    assert f"about {v.cases_to_settle} more calls both endpoints made would likely settle it" in v.headline
    assert "second look" in v.headline and "sequential" in v.headline and v.warnings
    # with that many more units and the same difference, the 95% interval's upper half fits inside the margin
    se = 0.08 / 1.959964 * (60 / (60 + v.cases_to_settle)) ** 0.5
    assert 1.959964 * se <= 0.05 - 0.01 + 1e-9


def test_fingerprint_differs_only_with_a_calibrated_p_in_the_holm_family() -> None:
    ok_tc = _tc("cand", Interval(value=0.0, low=-0.01, high=0.01, n=400), 1.0)
    named = {"verdict": "int4-decode", "distance": 0.2, "ranking": [("int4-decode", 0.2), ("bf16", 3.1)],
             "indistinguishable_from": [], "p_value": 0.001, "false_alarm_rate": 0.01}
    v = verdict_for("cand", [ok_tc, _lp("cand", 0.005, named)], [], "ref")
    assert v.status == "differs", v.headline
    assert v.headline.startswith("cand differs from ref: KL profile closest to int4-decode (p = 0.001, A/A false-alarm "
                                 "rate 1.0 %); no task-level difference shown at this size (trigger F1 ")
    assert "schema accuracy per call +0.0 pts [-1.0, +1.0] of 400 calls)" in v.headline
    assert v.fingerprint is not None and v.fingerprint.p_holm == pytest.approx(0.004)  # 4 tests in the family
    weak = {**named, "p_value": 0.03}  # significant alone, not after Holm over four tests
    assert verdict_for("cand", [ok_tc, _lp("cand", 0.005, weak)], [], "ref").status == "inconclusive"
    uncalibrated = {k: v for k, v in named.items() if k not in ("p_value", "false_alarm_rate")}
    v2 = verdict_for("cand", [ok_tc, _lp("cand", 0.005, uncalibrated)], [], "ref")
    assert v2.status == "inconclusive" and "not error-controlled" in v2.headline
    same = {"verdict": "bf16", "distance": 0.0, "ranking": [("bf16", 0.0), ("fp8-kv", 2.0)], "p_value": 1.0}
    assert verdict_for("cand", [ok_tc, _lp("cand", 0.001, same)], [], "ref").status == "consistent"


def test_kl_lower_bound_can_differ_but_never_be_consistent() -> None:
    ok_tc = _tc("cand", Interval(value=0.0, low=-0.01, high=0.01, n=400), 1.0)
    same = {"verdict": "bf16", "distance": 0.0, "ranking": [("bf16", 0.0)], "p_value": 1.0}
    low = _lp("cand", 0.001, same)
    low.metrics["kl_topk_lower"] = low.metrics.pop("kl_mean").model_copy(update={"method": "topk_lower_bound"})
    v = verdict_for("cand", [ok_tc, low], [], "ref")
    assert v.status == "inconclusive" and "a lower bound cannot show it small" in v.headline
    high = _lp("cand", 0.05, same)
    high.metrics["kl_topk_lower"] = high.metrics.pop("kl_mean")
    v = verdict_for("cand", [ok_tc, high], [], "ref")
    assert v.status == "differs" and "KL at least 0.05 [0.04, 0.06] nats/token (a lower bound)" in v.headline
    high.metrics["kl_tail_mass"] = Interval(value=0.031, n=40)
    assert "(a lower bound; reference mass beyond its top-k 3.1 %)" in verdict_for("cand", [ok_tc, high], [],
                                                                                   "ref").headline
    legacy = _lp("cand", 0.001, same, method="cluster_bootstrap")  # a kl_mean of unknown estimator: a lower bound
    assert verdict_for("cand", [ok_tc, legacy], [], "ref").status == "inconclusive"


def test_kl_counts_prompts_not_the_sequences_sampled_from_them() -> None:
    """Three continuations sampled per prompt share it: KL's independent units are the prompts its interval
    resamples (``<kl_path>_prompts``), read from the path ``kl_mean`` came from, not the sequences or the top-k path."""
    ok_tc = _tc("cand", Interval(value=0.0, low=-0.01, high=0.01, n=400), 1.0)
    same = {"verdict": "bf16", "distance": 0.0, "ranking": [("bf16", 0.0)], "p_value": 1.0}
    minimum = VerdictPolicy().min_units["kl_mean"]
    assert minimum == MIN_CLUSTERS == VerdictPolicy().min_units["kl_topk_lower"]
    for prompts, status in ((minimum - 1, "inconclusive"), (minimum, "consistent")):
        lp = _lp("cand", 0.001, same, method="exact_cluster_bootstrap_t")
        lp.extra.update(headline_path="decode", kl_path="sampled_decode_exact", kl_topk_path="decode")
        lp.counts.update(sampled_decode_exact_sequences=3 * prompts, sampled_decode_exact_prompts=prompts,
                         decode_sequences=99, decode_prompts=99)
        v = verdict_for("cand", [ok_tc, lp], [], "ref")
        e = next(e for e in v.evidence if e.metric == "kl_mean")
        assert (e.independent_units, e.unit, v.status) == (prompts, "prompts", status), v.headline
        if status == "inconclusive":
            assert v.not_testable == ["kl_mean"] and f"{prompts} prompts, needs at least {minimum}" in v.headline
    legacy = _lp("cand", 0.001, same, method="exact_cluster_bootstrap_t")  # a summary from before: sequences
    legacy.extra["headline_path"] = "forced"
    legacy.counts["forced_sequences"] = 24
    e = next(e for e in verdict_for("cand", [ok_tc, legacy], [], "ref").evidence if e.metric == "kl_mean")
    assert (e.independent_units, e.unit) == (24, "sequences")


def test_too_few_scenarios_are_not_testable_and_zero_width_is_not_proof() -> None:
    zero = Interval(value=0.0, low=0.0, high=0.0, n=4)
    v = verdict_for("cand", [_agent(zero, 4, 1.0)], [], "ref")
    assert v.status == "inconclusive" and v.not_testable == ["task_success"]
    assert "agent task success not testable: 4 scenarios, needs at least 10" in v.headline
    v = verdict_for("cand", [_agent(Interval(value=0.0, low=0.0, high=0.0, n=12), 12, 1.0)], [], "ref")
    e = v.evidence[0]
    assert e.difference.high == pytest.approx(1 - 0.025 ** (1 / 12)) and "exact bound" in (e.reason or "")
    assert v.status == "inconclusive"  # 12 identical scenarios bound the difference by 26 points, not 10
    v = verdict_for("cand", [_agent(Interval(value=0.0, low=0.0, high=0.0, n=80), 80, 1.0)], [], "ref")
    assert v.status == "consistent", v.headline  # 80 identical scenarios: within 4.5 points
    v = verdict_for("cand", [_agent(Interval(value=-1.0, low=-1.0, high=-1.0, n=12), 12, None)], [], "ref")
    assert v.status == "differs", v.headline  # fails every task the reference solves, on 12 scenarios
    assert "agent task success -100.0 pts [-100.0, -47.1] over 12 scenarios" in v.headline


def test_trigger_f1_against_a_twin_and_argument_agreement_headline() -> None:
    r = _tc("cand", Interval(value=0.0, low=-0.01, high=0.01, n=900), 1.0)
    r.metrics["argument_agreement"] = Interval(value=0.915, low=0.895, high=0.932, n=845)
    r.comparisons["argument_agreement"] = Comparison(
        metric="argument_agreement", difference=Interval(value=-0.075, low=-0.094, high=-0.058, n=845),
        p_value=1e-12, test="paired_bootstrap", unit="calls both endpoints made")
    v = verdict_for("cand", [r], [], "ref")
    assert v.status == "differs"
    assert v.headline == ("cand differs from ref: arguments differ from the reference in 8.5 % [6.8, 10.5] of 845 "
                          "calls (-7.5 pts [-9.4, -5.8] against a twin of the reference)")
    f1 = next(e for e in v.evidence if e.metric == "trigger_f1")
    assert f1.status == "consistent" and f1.basis.startswith("F1 against the reference minus")


def test_legacy_trigger_f1_can_be_close_but_never_different() -> None:
    r = _tc("cand", Interval(value=0.0, low=-0.01, high=0.01, n=900), 1.0,
            f1=Interval(value=0.5, low=0.45, high=0.55, n=900))
    del r.comparisons["trigger_f1"]
    v = verdict_for("cand", [r], [], "ref")
    f1 = next(e for e in v.evidence if e.metric == "trigger_f1")
    assert v.status == "inconclusive" and f1.p_outside is None and "floor was not measured" in (f1.reason or "")


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
    ({"min_units": {"task_success": 0}}, "[verdict.min_units].task_success: must be at least 1"),
    ({"material": ["latency"]}, "[verdict].material: 'latency' is not a headline metric"),
])
def test_bad_verdict_table_is_one_line_error(table: dict, message: str) -> None:
    with pytest.raises(PolicyError) as exc:
        parse_policy({"verdict": table}, "p.toml")
    assert str(exc.value).startswith("p.toml: ") and message in str(exc.value) and "\n" not in str(exc.value)
