"""Simulated runs judged by the real scoring and the real verdict: the calibration of docs/verdict.md.

Why here (not in a test file): the CI calibration tests (tests/run/test_verdict_*.py) and the long measurement
(benchmarks/verdict_calibration.py) must simulate the same worlds. Each world draws replies per case from a stated
truth (trigger probabilities, per-call invalid-argument rates, per-scenario success rates), writes them as the
ExchangeRecords a run would write, scores them with the product's scoring (``score_toolcall``, the agent
``score_records``) and judges them with ``verdict_for``. Nothing in between is simplified, so a change to scoring or
to the rule shows up in the error rates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from verifier.kinds.agent.scoring import score_records as score_agent
from verifier.kinds.toolcall import reference_repeats
from verifier.kinds.toolcall.scoring import score_toolcall
from verifier.kinds.toolcall.suite_format import ToolcallCase, parse_case
from verifier.records import ExchangeRecord, ToolCall
from verifier.run.summary import EndpointSuiteResult, Verdict
from verifier.run.verdict import VerdictPolicy, verdict_for

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
    "additionalProperties": False}}}
GOOD_ARGS, BAD_ARGS = '{"city": "Oslo"}', '{"city": "x"'  # the second is not JSON: a schema failure


def toolcall_cases(n: int, suite: str = "s", forced_every: int = 0) -> list[ToolcallCase]:
    """``n`` one-tool cases; every ``forced_every``-th case forces a call (``tool_choice: required``)."""
    out = []
    for i in range(n):
        body: dict = {"messages": [{"role": "user", "content": f"weather {i}?"}], "tools": [WEATHER]}
        if forced_every and i % forced_every == 0:
            body["tool_choice"] = "required"
        out.append(parse_case({**body, "_meta": {"id": f"{suite}-c{i}"}}, suite, None))
    return out


@dataclass(frozen=True)
class Endpoint:
    """How one endpoint answers: per-case trigger probabilities and the per-call invalid-arguments rate."""

    p_trigger: np.ndarray
    p_bad: float


def sampling_behaviour(n: int, rng: np.random.Generator, ambiguous: float = 0.2) -> np.ndarray:
    """Per-case trigger probabilities of a sampling server: most cases clear, ``ambiguous`` of them a coin flip."""
    p = np.where(rng.random(n) < 0.6, 0.97, 0.03)
    p[rng.random(n) < ambiguous] = 0.5
    return p


def _reply(endpoint: str, suite: str, case: ToolcallCase, p: float, how: Endpoint, rng: np.random.Generator,
           repeat: int, extra: dict) -> ExchangeRecord:
    calls = []
    if case.forced() is not None or rng.random() < p:
        args = BAD_ARGS if rng.random() < how.p_bad else GOOD_ARGS
        calls = [ToolCall(index=0, id="call_1", name="get_weather", arguments=args)]
    return ExchangeRecord(
        request_hash=f"h-{case.id}", kind="toolcall", suite=suite, case_id=case.id, endpoint=endpoint,
        status=200, attempts=1, latency_s=1.0, finish_reason="tool_calls" if calls else "stop",
        tool_calls=calls, content=None if calls else "no call", repeat=repeat, extra=extra)


def toolcall_records(endpoint: str, suite: str, cases: Sequence[ToolcallCase], how: Endpoint,
                     rng: np.random.Generator, repeat_ids: frozenset[str] = frozenset()) -> list[ExchangeRecord]:
    """One exchange per case; a forced case always gets a call (both endpoints honour ``tool_choice``).

    ``repeat_ids``: cases answered a second time, drawn afresh from the same behaviour and stored as the runner
    stores the reference's repeats (``repeat`` 1 = ``--repeats``, ``extra["reference_repeat_of"] = 0``).
    """
    out = [_reply(endpoint, suite, case, p, how, rng, 0, {}) for case, p in zip(cases, how.p_trigger)]
    out += [_reply(endpoint, suite, case, p, how, rng, 1, {reference_repeats.MARKER: 0})
            for case, p in zip(cases, how.p_trigger) if case.id in repeat_ids]
    return out


def score_toolcall_pair(suite: str, cases: Sequence[ToolcallCase], ref: Endpoint, cand: Endpoint,
                        rng: np.random.Generator, repeat_share: float = reference_repeats.DEFAULT_SHARE,
                        ) -> tuple[EndpointSuiteResult, EndpointSuiteResult]:
    """(reference, candidate) results of one simulated tool-call suite, through the real scoring.

    The reference answers ``repeat_share`` of the cases twice (the runner's default, chosen as the runner chooses:
    :func:`reference_repeats.choose`), so trigger F1 and argument agreement are judged against its measured floor.
    """
    repeat_ids = reference_repeats.choose([c.id for c in cases], repeat_share, 0)
    records = (toolcall_records("ref", suite, cases, ref, rng, repeat_ids)
               + toolcall_records("cand", suite, cases, cand, rng))
    by = {r.endpoint: r for r in score_toolcall(suite, cases, records, "ref", ["ref", "cand"])}
    return by["ref"], by["cand"]


def judge(pairs: Sequence[tuple[EndpointSuiteResult, EndpointSuiteResult]], policy: VerdictPolicy) -> Verdict:
    return verdict_for("cand", [c for _, c in pairs], [r for r, _ in pairs], "ref", policy)


# ------------------------------------------------------------------------------------------------ agent suites


def _trial(endpoint: str, scenario: str, trial: int, success: bool) -> list[ExchangeRecord]:
    """A two-step trial (one valid call, then a final answer) ending in ``success`` (the runner's record shape)."""
    def step(idx: int, actions: list[str], stop: str | None) -> ExchangeRecord:
        extra: dict = {"attempt": 0, "horizon": 2, "n_calls": len(actions), "n_invalid": 0, "actions": actions,
                       "calls": [{"name": "x", "valid": True, "error_kind": None} for _ in actions]}
        if stop:
            extra.update(stop_reason=stop, success=success)
        return ExchangeRecord(request_hash="h", status=200, kind="agent_step", suite="agent", case_id=scenario,
                              repeat=trial, endpoint=endpoint, step=idx, extra=extra)
    return [step(0, ["look()"], None), step(1, [], "final_answer")]


def agent_records(endpoint: str, p_success: Sequence[float], trials: int,
                  rng: np.random.Generator) -> list[ExchangeRecord]:
    """``trials`` trials per scenario, each a success with that scenario's probability."""
    out: list[ExchangeRecord] = []
    for s, p in enumerate(p_success):
        for t in range(trials):
            out += _trial(endpoint, f"sc{s}", t, bool(rng.random() < p))
    return out


def score_agent_pair(ref_p: Sequence[float], cand_p: Sequence[float], trials: int,
                     rng: np.random.Generator) -> tuple[EndpointSuiteResult, EndpointSuiteResult]:
    records = agent_records("ref", ref_p, trials, rng) + agent_records("cand", cand_p, trials, rng)
    by = {r.endpoint: r for r in score_agent(records, "agent", "ref", ["ref", "cand"])}
    return by["ref"], by["cand"]


def shifted(p: np.ndarray, delta: float) -> np.ndarray:
    """Per-scenario success probabilities moved by ``delta`` on average (clipped to [0, 1], then re-centred)."""
    q = np.clip(p + delta, 0.0, 1.0)
    return np.clip(q + (p.mean() + delta - q.mean()), 0.0, 1.0)
