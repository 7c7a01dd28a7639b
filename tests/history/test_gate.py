"""The CI gate: policy validation, decision rules, exit codes, JUnit and Markdown outputs."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.report.fixtures import make_summary, write_run
from verifier.cli.history import gate
from verifier.history import index_summary
from verifier.history.gate import (
    DEFAULT_POLICY,
    PolicyError,
    Threshold,
    evaluate,
    judge,
    load_policy,
    parse_policy,
    to_markdown,
)
from verifier.records import Interval

REPO = Path(__file__).resolve().parents[2]


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command(name="gate")(gate)

    @app.callback()
    def _root() -> None:  # a group, so "gate" is a subcommand as in the real CLI
        """test CLI"""

    return app


def _invoke(*args: str):
    return CliRunner().invoke(_app(), ["gate", *args], env={"COLUMNS": "200"})


def _policy(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "policy.toml"
    p.write_text(text)
    return p


def test_example_policy_is_the_default() -> None:
    p = load_policy(REPO / "examples" / "policy.toml")
    assert p.thresholds == DEFAULT_POLICY.thresholds
    assert (p.gate, p.drift, p.allow_drift) == (DEFAULT_POLICY.gate, DEFAULT_POLICY.drift, DEFAULT_POLICY.allow_drift)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[thresholds]\ntrigger_f2 = 0.7\n", r"\[thresholds\]\.trigger_f2: unknown metric 'trigger_f2'"),
        ("[thresholds]\nkl_mean_max = 'low'\n", r"\[thresholds\]\.kl_mean_max: threshold must be a number"),
        ("[thresholds]\ndrift = 1\n", r"\[thresholds\]\.drift: must be true or false"),
        ("[limits]\nx = 1\n", r"unknown table \[limits\]"),
        ("[gate]\ndecision = 'vibes'\n", r"\[gate\]\.decision: "),
        ("[drift]\nalpha = 2\n", r"\[drift\]\.alpha: "),
        ("[thresholds\n", r"not valid TOML"),
    ],
)
def test_bad_policy_names_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = _policy(tmp_path, text)
    with pytest.raises(PolicyError, match=message):
        load_policy(path)
    s, _ = make_summary()
    run = write_run(tmp_path / "run", s)
    res = _invoke(str(run), "--policy", str(path))
    assert res.exit_code == 2
    assert str(path) in res.output


def test_pass_k_and_max_names() -> None:
    p = parse_policy({"thresholds": {"pass^3": 0.4, "latency_p95_s_max": 2.0}})
    assert [(t.metric, t.upper) for t in p.thresholds] == [("pass^3", False), ("latency_p95_s", True)]


@pytest.mark.parametrize(
    ("iv", "decision", "expected"),
    [
        (Interval(value=0.80, low=0.75, high=0.85, n=200), "point", "pass"),
        (Interval(value=0.75, low=0.70, high=0.80, n=200), "point", "warn"),  # CI reaches below 0.73
        (Interval(value=0.72, low=0.68, high=0.76, n=200), "point", "fail"),
        (Interval(value=0.75, low=0.70, high=0.80, n=200), "ci_strict", "fail"),
        (Interval(value=0.80, low=0.75, high=0.85, n=200), "ci_strict", "pass"),
        (Interval(value=0.72, low=0.68, high=0.76, n=200), "ci_lenient", "warn"),
        (Interval(value=0.60, low=0.55, high=0.65, n=200), "ci_lenient", "fail"),
    ],
)
def test_decision_rules_lower_bound(iv: Interval, decision: str, expected: str) -> None:
    th = Threshold(key="trigger_f1", metric="trigger_f1", bound=0.73, upper=False)
    assert judge(iv, th, decision)[0] == expected


def test_upper_bound_uses_the_other_ci_end() -> None:
    th = Threshold(key="kl_mean_max", metric="kl_mean", bound=0.05, upper=True)
    assert judge(Interval(value=0.04, low=0.035, high=0.045, n=400), th, "point")[0] == "pass"
    assert judge(Interval(value=0.04, low=0.03, high=0.06, n=400), th, "point")[0] == "warn"
    assert judge(Interval(value=0.06, low=0.055, high=0.065, n=400), th, "point")[0] == "fail"


def test_gate_exit_codes_junit_and_markdown(tmp_path: Path) -> None:
    s, _ = make_summary()
    run = write_run(tmp_path / "run", s)
    lenient = _policy(tmp_path, "[thresholds]\ntrigger_f1 = 0.5\nschema_accuracy = 0.5\n")
    res = _invoke(str(run), "--policy", str(lenient))
    assert res.exit_code == 0, res.output

    strict = tmp_path / "strict.toml"
    strict.write_text("[thresholds]\ntrigger_f1 = 0.73\nschema_accuracy = 0.95\ncache_hit_rate = 0.5\n"
                      "[gate]\nmissing = \"warn\"\n")
    junit, md = tmp_path / "out" / "gate.xml", tmp_path / "out" / "gate.md"
    res = _invoke(str(run), "--policy", str(strict), "--junit", str(junit), "--markdown", str(md))
    assert res.exit_code == 1, res.output  # int4-decode's schema accuracy is ~0.83

    root = ET.parse(junit).getroot()
    cases = root.findall(".//testcase")
    # candidates (2) x thresholds (3): cache_hit_rate is not measured -> one "warn" case each, no suite split
    assert len(cases) == 2 * 3
    assert {c.get("classname") for c in cases} == {"fp8-kv", "int4-decode"}
    failed = [c for c in cases if c.find("failure") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failed] == [
        ("int4-decode", "schema_accuracy >= 0.95 [toolcall-core]")
    ]
    assert root.find("testsuite").get("failures") == "1"

    text = md.read_text()
    assert text.startswith("## verifier gate: ❌ fail")
    assert "| int4-decode | schema\\_accuracy &gt;= 0.95 [toolcall-core] | ❌ fail |" in text
    assert "| fp8-kv | schema\\_accuracy &gt;= 0.95 [toolcall-core] | ✅ pass |" in text
    assert "not measured in this run" in text


def test_missing_run_is_exit_2(tmp_path: Path) -> None:
    res = _invoke(str(tmp_path / "nothing"))
    assert res.exit_code == 2 and "summary.json" in res.output


def test_drift_false_fails_on_drift(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    for night in range(6):
        s, _ = make_summary(run_id=f"n{night}", started_at=f"2026-01-0{night + 1}T02:00:00Z", seed=50 + night, n=300)
        index_summary(s, db)
    bad, _ = make_summary(run_id="tonight", started_at="2026-02-01T02:00:00Z", seed=7, n=300,
                          schema_p={"ref": 0.99, "fp8-kv": 0.75, "int4-decode": 0.90})
    run = write_run(tmp_path / "run", bad)
    index_summary(bad, db)  # as `verifier run` does: tonight is in the db, and must not count as its own history
    policy = _policy(tmp_path, "[thresholds]\ndrift = false\n")
    junit = tmp_path / "g.xml"
    res = _invoke(str(run), "--policy", str(policy), "--db", str(db), "--junit", str(junit))
    assert res.exit_code == 1, res.output
    failed = {c.get("classname") for c in ET.parse(junit).getroot().iter("testcase") if c.find("failure") is not None}
    assert failed == {"fp8-kv"}


def test_markdown_neutralises_names() -> None:
    s, _ = make_summary()
    s.endpoints[1].name = "evil|<img src=x>"
    for r in s.results:
        if r.endpoint == "fp8-kv":
            r.endpoint = "evil|<img src=x>"
    text = to_markdown(evaluate(s, DEFAULT_POLICY))
    assert "<img" not in text and "evil\\|&lt;img" in text
