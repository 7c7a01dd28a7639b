"""Which cases the reference answers twice, how the choice survives --limit and --shard, and a real run showing it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.kinds.toolcall.reference_repeats import choose, share_option
from verifier.run.registry import load_suite
from verifier.run.shard import Shard, shard_suite
from verifier.run.summary import RunSummary


@pytest.mark.parametrize("n,share,expected", [(1000, 0.1, 100), (200, 0.1, 50), (30, 0.1, 30), (1000, 0.0, 0),
                                              (1000, 0.5, 500), (10, 1.0, 10)])
def test_share_with_a_floor_of_fifty_cases(n: int, share: float, expected: int) -> None:
    assert len(choose([f"c{i}" for i in range(n)], share, seed=0)) == expected


def test_choice_is_seeded_and_independent_of_order() -> None:
    ids = [f"c{i}" for i in range(1000)]
    assert choose(ids, 0.1, 0) == choose(list(reversed(ids)), 0.1, 0)
    assert choose(ids, 0.1, 0) != choose(ids, 0.1, 1)


@pytest.mark.parametrize("raw", [1.5, -0.1, "many", None])
def test_bad_share_is_one_clear_error(raw: object) -> None:
    with pytest.raises(ValueError, match="reference_repeat_share: expected a number between 0 and 1"):
        share_option({"reference_repeat_share": raw})


def test_shards_agree_on_the_chosen_cases() -> None:
    """The choice is made on the whole (limited) suite before --shard splits it: the shards' repeated cases are
    exactly the unsharded run's, split between them."""
    kind, suite = load_suite("toolcall-core", {"limit": 300, "seed": 4})
    assert len(suite.reference_repeat_ids) == 150  # the default half of 300
    parts = [shard_suite(kind, suite, Shard(i, 3)) for i in (1, 2, 3)]
    repeated = [{c.id for c in kind._repeated(p)} for p in parts]
    assert set().union(*repeated) == suite.reference_repeat_ids and sum(map(len, repeated)) == 150


def test_share_zero_sends_no_second_answers() -> None:
    _, suite = load_suite("toolcall-core", {"limit": 20, "reference_repeat_share": 0})
    assert suite.reference_repeat_ids == frozenset()
    _, suite = load_suite("toolcall-core", {"limit": 20})
    assert len(suite.reference_repeat_ids) == 20  # the default: at least 50 cases, so all 20


def test_flag_out_of_range_is_refused_before_anything_starts(tmp_path) -> None:
    res = CliRunner().invoke(app, ["run", "--reference", "builtin:tiny", "--suite", "toolcall-smoke",
                                   "--reference-repeat-share", "2", "--out", str(tmp_path / "r"), "--no-history"])
    assert res.exit_code == 2 and "--reference-repeat-share" in res.output
    assert not (tmp_path / "r" / "records.jsonl").exists()


@pytest.mark.slow
def test_builtin_run_answers_reference_cases_twice_and_compares_against_that_floor(tmp_path) -> None:
    """A real ``verifier run`` on the built-in engine (the shipped model, which calls tools): the reference's
    second answers are in records.jsonl under their own key, its result says whether it samples, and the
    candidate's headlines are compared against that floor, each with its unit."""
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--reference", "builtin:tiny", "--endpoint", "fp8=builtin:tiny?kv=fp8",
                                   "--suite", "toolcall-smoke", "--limit", "6", "--reference-repeat-share", "0.1",
                                   "--no-history", "-q", "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    again = [r for r in recs if "reference_repeat_of" in r["extra"]]
    assert len(recs) == 18 and len(again) == 6 and all(r["status"] == 200 for r in recs)
    assert {(r["endpoint"], r["repeat"]) for r in again} == {("reference", 1)}
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    assert summary.settings["options"]["reference_repeat_share"] == 0.1  # recorded: --resume and merge reuse it
    ref, cand = summary.result("reference", "toolcall-smoke"), summary.result("fp8", "toolcall-smoke")
    assert ref is not None and cand is not None
    assert ref.counts["reference_repeat_cases"] == 6 and ref.counts["requests"] == 12
    assert ref.metrics["reference_repeat_differs"].n == 6 and not ref.extra["reference_repeats"]["samples"]
    assert ref.metrics["latency_p50_s"].n == 6  # second answers count for the floor only
    for metric in ("trigger_f1", "schema_accuracy", "argument_agreement"):
        comp = cand.comparisons[metric]
        d = comp.difference
        assert comp.unit and comp.independent_units and comp.p_value is not None
        assert d.low is not None and d.high is not None and d.low < d.high
