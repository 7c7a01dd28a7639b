"""A/A calibration of the verdict: the reference under another name must come out ``differs`` at most alpha of runs.

Each simulated run draws tool-call replies for a reference and a candidate from the *same* per-case behaviour (a
sampling server: ambiguous cases trigger a call about half the time, arguments are sometimes malformed), writes them
as ExchangeRecords, scores them with the real scoring code (``score_toolcall``) and judges them with the real rule
(``verdict_for``). Power controls (a candidate that breaks schemas, a deterministic A/A) show the test can fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from verifier.kinds.toolcall.scoring import score_toolcall
from verifier.kinds.toolcall.suite_format import ToolcallCase, parse_case
from verifier.records import ExchangeRecord, ToolCall
from verifier.run.verdict import VerdictPolicy, verdict_for

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
    "additionalProperties": False}}}
N_CASES = 120
RUNS = 300  # measured: 4 of 400 runs said differs (1%), the exact McNemar test being conservative
ALPHA = 0.05


def _cases() -> list[ToolcallCase]:
    return [parse_case({"messages": [{"role": "user", "content": f"weather {i}?"}], "tools": [WEATHER],
                        "_meta": {"id": f"c{i}"}}, "mem", None) for i in range(N_CASES)]


def _behaviour(rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Per-case trigger probability (a fifth of the cases ambiguous) and a malformed-arguments rate."""
    p = np.where(rng.random(N_CASES) < 0.6, 0.97, 0.03)
    ambiguous = rng.random(N_CASES) < 0.2
    p[ambiguous] = 0.5
    return p, 0.05


def _records(endpoint: str, p_trigger: np.ndarray, p_bad: float, rng: np.random.Generator) -> list[ExchangeRecord]:
    out = []
    for i, p in enumerate(p_trigger):
        calls = []
        if rng.random() < p:
            args = '{"city": "x"' if rng.random() < p_bad else '{"city": "Oslo"}'
            calls = [ToolCall(index=0, id="call_1", name="get_weather", arguments=args)]
        out.append(ExchangeRecord(
            request_hash=f"h{i}", kind="toolcall", suite="s", case_id=f"c{i}", endpoint=endpoint, status=200,
            attempts=1, latency_s=1.0, finish_reason="tool_calls" if calls else "stop", tool_calls=calls,
            content=None if calls else "no call",
        ))
    return out


def _verdict(ref: list[ExchangeRecord], cand: list[ExchangeRecord], cases: list[ToolcallCase]):
    results = score_toolcall("s", cases, ref + cand, "ref", ["ref", "cand"])
    by = {r.endpoint: r for r in results}
    return verdict_for("cand", [by["cand"]], [by["ref"]], "ref", VerdictPolicy(alpha=ALPHA))


@pytest.fixture(scope="module")
def cases() -> list[ToolcallCase]:
    return _cases()


def test_aa_runs_say_differs_at_most_alpha(cases: list[ToolcallCase]) -> None:
    rng = np.random.default_rng(20260105)
    statuses = []
    for _ in range(RUNS):
        p, bad = _behaviour(rng)
        v = _verdict(_records("ref", p, bad, rng), _records("cand", p, bad, rng), cases)
        statuses.append(v.status)
    differs = statuses.count("differs")
    assert differs <= ALPHA * RUNS, f"{differs} of {RUNS} A/A runs said differs (allowed {ALPHA * RUNS:g})"
    # a sampling A/A has trigger F1 well below 1, so it cannot be shown consistent: inconclusive, never differs
    assert statuses.count("inconclusive") >= RUNS - differs - statuses.count("consistent")


def test_deterministic_aa_is_consistent(cases: list[ToolcallCase]) -> None:
    """The same replies under another name (a deterministic server): every difference is shown inside its margin."""
    rng = np.random.default_rng(1)
    p, bad = _behaviour(rng)
    ref = _records("ref", p, bad, rng)
    cand = [r.model_copy(update={"endpoint": "cand"}) for r in ref]
    v = _verdict(ref, cand, cases)
    assert v.status == "consistent", v.headline
    assert v.headline.startswith("cand is consistent with ref: trigger F1")
    assert {e.metric for e in v.evidence} == {"trigger_f1", "schema_accuracy"}


def test_broken_schemas_are_found(cases: list[ToolcallCase]) -> None:
    """Power control: a candidate whose arguments are malformed 35% of the time (reference: 5%) differs."""
    rng = np.random.default_rng(2)
    p, bad = _behaviour(rng)
    v = _verdict(_records("ref", p, bad, rng), _records("cand", p, 0.35, rng), cases)
    assert v.status == "differs", v.headline
    assert "schema accuracy -" in v.headline
    schema = next(e for e in v.evidence if e.metric == "schema_accuracy")
    assert schema.significant and schema.p_holm is not None and schema.p_holm <= ALPHA
