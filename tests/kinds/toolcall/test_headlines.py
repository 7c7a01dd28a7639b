"""The tool-call headlines on their own units, through the real scoring (records -> ``score_toolcall``).

A *sampling* server is simulated per case: it calls the tool with a per-case probability, sometimes with other
arguments, sometimes malformed. The reference answers a seeded share of the cases a second time (records marked
``reference_repeat_of``), exactly as the kind stores them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from verifier.kinds.toolcall.reference_repeats import choose
from verifier.kinds.toolcall.scoring import score_toolcall
from verifier.kinds.toolcall.suite_format import ToolcallCase, parse_case
from verifier.records import ExchangeRecord, ToolCall
from verifier.run.summary import EndpointSuiteResult

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
    "additionalProperties": False}}}


def _cases(n: int, temperature: float | None = 0) -> list[ToolcallCase]:
    extra = {} if temperature is None else {"temperature": temperature}
    return [parse_case({"messages": [{"role": "user", "content": f"weather {i}?"}], "tools": [WEATHER],
                        "_meta": {"id": f"c{i}"}, **extra}, "mem", None) for i in range(n)]


@dataclass
class Server:
    """Per-case behaviour: trigger probability, chance of other arguments, chance of malformed arguments."""

    p_trigger: np.ndarray
    p_other_args: np.ndarray
    p_bad: float = 0.0

    def records(self, endpoint: str, rng: np.random.Generator, only: frozenset[str] | None = None,
                again: bool = False) -> list[ExchangeRecord]:
        out = []
        for i, p in enumerate(self.p_trigger):
            cid = f"c{i}"
            if only is not None and cid not in only:
                continue
            calls = []
            if rng.random() < p:
                args = ('{"city": "x"' if rng.random() < self.p_bad else
                        '{"city": "Bergen"}' if rng.random() < self.p_other_args[i] else '{"city": "Oslo"}')
                calls = [ToolCall(index=0, id="call_1", name="get_weather", arguments=args)]
            out.append(ExchangeRecord(
                request_hash=f"h{i}", kind="toolcall", suite="s", case_id=cid, endpoint=endpoint, status=200,
                latency_s=1.0, finish_reason="tool_calls" if calls else "stop", tool_calls=calls,
                content=None if calls else "no call", repeat=1 if again else 0,
                extra={"reference_repeat_of": 0} if again else {}))
        return out


def sampling_server(n: int, rng: np.random.Generator, ambiguous: float = 0.2, p_bad: float = 0.0) -> Server:
    p = np.where(rng.random(n) < 0.6, 0.97, 0.03)
    p[rng.random(n) < ambiguous] = 0.5
    return Server(p_trigger=p, p_other_args=np.where(rng.random(n) < 0.2, 0.3, 0.0), p_bad=p_bad)


def score(cases: list[ToolcallCase], ref: Server, cand: Server, rng: np.random.Generator,
          share: float = 0.1) -> dict[str, EndpointSuiteResult]:
    again = choose([c.id for c in cases], share, seed=0)
    recs = ref.records("ref", rng) + ref.records("ref", rng, again, again=True) + cand.records("cand", rng)
    return {r.endpoint: r for r in score_toolcall("s", cases, recs, "ref", ["ref", "cand"])}


def test_a_sampling_references_twin_has_a_trigger_f1_difference_around_zero() -> None:
    rng = np.random.default_rng(7)
    cases = _cases(300)
    srv = sampling_server(300, rng)
    res = score(cases, srv, srv, rng)
    ref, cand = res["ref"], res["cand"]
    assert cand.metrics["trigger_f1"].value < 0.95  # the old absolute margin (F1 >= 0.95) would fail this twin
    comp = cand.comparisons["trigger_f1"]
    assert comp.difference.low < 0 < comp.difference.high and comp.p_value > 0.05
    assert comp.independent_units == 50 and comp.difference.n == 300  # 50 cases answered twice (at least 50)
    assert ref.metrics["reference_repeat_differs"].value > 0 and ref.extra["reference_repeats"]["samples"]
    assert "temperature 0" in ref.extra["reference_repeats"]["note"]
    args = cand.comparisons["argument_agreement"]
    assert args.difference.low < 0 < args.difference.high
    assert cand.metrics["trigger_f1_floor"] == ref.metrics["reference_self_trigger_f1"]


def test_same_trigger_rate_but_ten_points_lower_f1_is_detected() -> None:
    """The candidate triggers as often as the reference, on partly other cases: the paired trigger-rate test
    (McNemar) sees nothing, the F1 against the reference's own floor does."""
    rng = np.random.default_rng(11)
    n = 600
    cases = _cases(n)
    ref = sampling_server(n, rng, ambiguous=0.0)
    p = ref.p_trigger.copy()
    on, off = np.flatnonzero(p > 0.5), np.flatnonzero(p < 0.5)
    k = int(0.14 * len(on))  # moves the F1 by about 10 points (and the trigger rate by nothing)
    p[rng.choice(on, k, replace=False)], p[rng.choice(off, k, replace=False)] = 0.03, 0.97
    res = score(cases, ref, Server(p_trigger=p, p_other_args=ref.p_other_args), rng)
    cand = res["cand"]
    comp = cand.comparisons["trigger_f1"]
    assert comp.difference.value < -0.08 and comp.difference.high < 0 and comp.p_value < 0.01
    assert cand.comparisons["trigger_rate"].p_value > 0.05


@pytest.mark.slow
def test_schema_accuracy_is_per_call_on_cases_both_called() -> None:
    """Half the cases trigger; the candidate's calls are 5 points less often valid. Per exchange (a reply without
    a call counted valid) the drop would read as 2.5 points; per call it is 5."""
    rng = np.random.default_rng(5)
    n = 3000
    cases = _cases(n)
    p = np.where(rng.random(n) < 0.5, 1.0, 0.0)
    none = np.zeros(n)
    res = score(cases, Server(p, none, p_bad=0.02), Server(p, none, p_bad=0.07), rng, share=0.0)
    comp = res["cand"].comparisons["schema_accuracy"]
    assert comp.difference.value == pytest.approx(-0.05, abs=0.012)
    assert comp.difference.low < -0.05 < comp.difference.high and comp.p_value < 1e-3
    assert comp.independent_units == comp.difference.n == int(p.sum())


def test_small_n_intervals_are_never_zero_width() -> None:
    """Six identical deterministic answers from both endpoints (and the reference's repeats): every headline
    difference is 0, none is certain."""
    rng = np.random.default_rng(0)
    cases = _cases(6)
    det = Server(p_trigger=np.array([1.0, 1.0, 1.0, 0.0, 0.0, 1.0]), p_other_args=np.zeros(6))
    res = score(cases, det, det, rng)
    cand = res["cand"]
    for metric in ("trigger_f1", "schema_accuracy", "argument_agreement"):
        d = cand.comparisons[metric].difference
        assert d.value == 0 and d.low is not None and d.high is not None and d.low < 0 < d.high, (metric, d)
    assert res["ref"].metrics["reference_self_trigger_f1"].low < 1
    assert not res["ref"].extra["reference_repeats"]["samples"]


def test_second_answers_change_no_other_reference_figure() -> None:
    rng = np.random.default_rng(2)
    cases = _cases(80)
    srv = sampling_server(80, rng, p_bad=0.1)
    first, cand = srv.records("ref", rng), srv.records("cand", rng)
    second = srv.records("ref", rng, choose([c.id for c in cases], 0.1, 0), again=True)
    without = {r.endpoint: r for r in score_toolcall("s", cases, first + cand, "ref", ["ref", "cand"])}
    with_ = {r.endpoint: r for r in score_toolcall("s", cases, first + second + cand, "ref", ["ref", "cand"])}
    for ep in ("ref", "cand"):
        shared = without[ep].metrics.keys() & with_[ep].metrics.keys()
        assert {m: with_[ep].metrics[m] for m in shared} == {m: without[ep].metrics[m] for m in shared}
        assert without[ep].counts.items() <= with_[ep].counts.items()
    assert "trigger_f1_floor" in with_["cand"].metrics and "trigger_f1_floor" not in without["cand"].metrics
    # without a floor the F1 is still compared with perfect agreement, and says it cannot test
    comp = without["cand"].comparisons["trigger_f1"]
    assert comp.p_value is None and comp.test is not None and comp.test.startswith("none")


def test_forced_call_comparison_names_its_unit() -> None:
    forced = [parse_case({"messages": [{"role": "user", "content": f"w {i}"}], "tools": [WEATHER],
                          "tool_choice": "required", "_meta": {"id": f"c{i}"}}, "mem", None) for i in range(20)]
    rng = np.random.default_rng(1)
    srv = Server(p_trigger=np.full(20, 0.9), p_other_args=np.zeros(20))
    comp = score(forced, srv, srv, rng)["cand"].comparisons["forced_call_success"]
    assert comp.unit == "exchanges of forced cases both endpoints answered" and comp.independent_units == 20


# ------------------------------------------------------------------ calibration (many runs: slow)

RUNS = 400  # 2x miscalibration (10 % instead of 5 %) puts ~40 runs over, the bound of 30 catches it


@pytest.mark.slow
def test_sampling_aa_says_different_at_most_alpha() -> None:
    """A/A with a sampling reference: each headline's p < 0.05 in at most 30 of 400 runs (expected 20; a test at
    2x the level would be expected at 40)."""
    rng = np.random.default_rng(20260105)
    cases = _cases(120)
    rejected = dict.fromkeys(("trigger_f1", "argument_agreement", "schema_accuracy"), 0)
    for _ in range(RUNS):
        srv = sampling_server(120, rng, p_bad=0.05)
        cand = score(cases, srv, srv, rng)["cand"]
        for m in rejected:
            c = cand.comparisons.get(m)
            rejected[m] += c is not None and c.p_value is not None and c.p_value < 0.05
    assert all(v <= 30 for v in rejected.values()), rejected


@pytest.mark.slow
def test_schema_interval_covers_a_drop_of_exactly_the_margin() -> None:
    """True per-call drop of 5 points (the default margin): the 95% interval covers -0.05 in at least 90 % of
    150 runs at n = 400 (a 2x narrower interval would cover about 68 %)."""
    rng = np.random.default_rng(9)
    cases = _cases(400)
    covered, estimates = 0, []
    for _ in range(150):
        p = np.where(rng.random(400) < 0.5, 0.97, 0.03)
        ref, cand = Server(p, np.zeros(400), p_bad=0.03), Server(p, np.zeros(400), p_bad=0.08)
        d = score(cases, ref, cand, rng, share=0.0)["cand"].comparisons["schema_accuracy"].difference
        covered += d.low <= -0.05 <= d.high
        estimates.append(d.value)
    assert covered >= 135, covered
    assert float(np.mean(estimates)) == pytest.approx(-0.05, abs=0.006)
