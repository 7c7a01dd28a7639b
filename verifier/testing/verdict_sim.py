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
from functools import lru_cache

import numpy as np

from verifier.kinds.agent.scoring import score_records as score_agent
from verifier.kinds.logprob.tracks import SAMPLE_PREFIX
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
CITIES = ("Oslo", "Bergen", "Trondheim")


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
    """How one endpoint answers: per-case trigger probabilities and the per-call invalid-arguments rate.

    Arguments, when valid, name :data:`CITIES` ``[0]``; ``p_alt`` (per case) is the chance they name ``CITIES[1]``
    instead (a case whose arguments the model is unsure of: a sampling server answers it differently run to run),
    and ``p_other`` (per call) the chance they name ``CITIES[2]``, a value no twin gives (an extra disagreement).
    Without them no draw is made, so the worlds that do not use them draw exactly as before.
    """

    p_trigger: np.ndarray
    p_bad: float
    p_alt: np.ndarray | None = None
    p_other: float = 0.0


def sampling_behaviour(n: int, rng: np.random.Generator, ambiguous: float = 0.2) -> np.ndarray:
    """Per-case trigger probabilities of a sampling server: most cases clear, ``ambiguous`` of them a coin flip."""
    p = np.where(rng.random(n) < 0.6, 0.97, 0.03)
    p[rng.random(n) < ambiguous] = 0.5
    return p


@lru_cache(maxsize=250_000)
def _record(endpoint: str, suite: str, case_id: str, repeat: int, args: str | None) -> ExchangeRecord:
    """The record of one reply (``args`` None: no call). Records are never changed by scoring, so one object per
    distinct reply is shared by every simulated run: building thousands of them per run cost a fifth of its time."""
    calls = [] if args is None else [ToolCall(index=0, id="call_1", name="get_weather", arguments=args)]
    extra = {reference_repeats.MARKER: 0} if repeat else {}
    return ExchangeRecord(
        request_hash=f"h-{case_id}", kind="toolcall", suite=suite, case_id=case_id, endpoint=endpoint,
        status=200, attempts=1, latency_s=1.0, finish_reason="tool_calls" if calls else "stop",
        tool_calls=calls, content=None if calls else "no call", repeat=repeat, extra=extra)


def _reply(endpoint: str, suite: str, case: ToolcallCase, i: int, how: Endpoint, rng: np.random.Generator,
           repeat: int) -> ExchangeRecord:
    args = None
    if case.forced() is not None or rng.random() < how.p_trigger[i]:
        if rng.random() < how.p_bad:
            args = BAD_ARGS
        else:
            city = CITIES[0]
            if how.p_alt is not None and rng.random() < how.p_alt[i]:
                city = CITIES[1]
            if how.p_other and rng.random() < how.p_other:
                city = CITIES[2]
            args = GOOD_ARGS if city == CITIES[0] else f'{{"city": "{city}"}}'
    return _record(endpoint, suite, case.id, repeat, args)


def toolcall_records(endpoint: str, suite: str, cases: Sequence[ToolcallCase], how: Endpoint,
                     rng: np.random.Generator, repeat_ids: frozenset[str] = frozenset()) -> list[ExchangeRecord]:
    """One exchange per case; a forced case always gets a call (both endpoints honour ``tool_choice``).

    ``repeat_ids``: cases answered a second time, drawn afresh from the same behaviour and stored as the runner
    stores the reference's repeats (``repeat`` 1 = ``--repeats``, ``extra["reference_repeat_of"] = 0``).
    """
    out = [_reply(endpoint, suite, case, i, how, rng, 0) for i, case in enumerate(cases)]
    out += [_reply(endpoint, suite, case, i, how, rng, 1) for i, case in enumerate(cases) if case.id in repeat_ids]
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


@lru_cache(maxsize=100_000)
def _trial(endpoint: str, scenario: str, trial: int, success: bool) -> tuple[ExchangeRecord, ...]:
    """A two-step trial (one valid call, then a final answer) ending in ``success`` (the runner's record shape).

    Shared between simulated runs like :func:`_record` (scoring never changes a record)."""
    def step(idx: int, actions: list[str], stop: str | None) -> ExchangeRecord:
        extra: dict = {"attempt": 0, "horizon": 2, "n_calls": len(actions), "n_invalid": 0, "actions": actions,
                       "calls": [{"name": "x", "valid": True, "error_kind": None} for _ in actions]}
        if stop:
            extra.update(stop_reason=stop, success=success)
        return ExchangeRecord(request_hash="h", status=200, kind="agent_step", suite="agent", case_id=scenario,
                              repeat=trial, endpoint=endpoint, step=idx, extra=extra)
    return step(0, ["look()"], None), step(1, [], "final_answer")


def agent_records(endpoint: str, p_success: Sequence[float] | np.ndarray, trials: int,
                  rng: np.random.Generator) -> list[ExchangeRecord]:
    """``trials`` trials per scenario, each a success with that scenario's probability."""
    out: list[ExchangeRecord] = []
    for s, p in enumerate(p_success):
        for t in range(trials):
            out += _trial(endpoint, f"sc{s}", t, bool(rng.random() < p))
    return out


def score_agent_pair(ref_p: Sequence[float] | np.ndarray, cand_p: Sequence[float] | np.ndarray, trials: int,
                     rng: np.random.Generator) -> tuple[EndpointSuiteResult, EndpointSuiteResult]:
    records = agent_records("ref", ref_p, trials, rng) + agent_records("cand", cand_p, trials, rng)
    by = {r.endpoint: r for r in score_agent(records, "agent", "ref", ["ref", "cand"])}
    return by["ref"], by["cand"]


def shifted(p: np.ndarray, delta: float) -> np.ndarray:
    """Per-scenario success probabilities moved by ``delta`` on average (clipped to [0, 1], then re-centred)."""
    q = np.clip(p + delta, 0.0, 1.0)
    return np.clip(q + (p.mean() + delta - q.mean()), 0.0, 1.0)


# ------------------------------------------------------------------------------------------------ KL (logprob)


@dataclass(frozen=True)
class _Manifest:
    name: str
    content_hash: str = "simulated"


@dataclass(frozen=True)
class _Case:
    id: str
    continuation: str | None = None


@dataclass(frozen=True)
class LogprobSuite:
    """The few fields of a logprob suite that scoring reads (a simulated suite has no files)."""

    manifest: _Manifest
    cases: tuple[_Case, ...]


def kl_sequences(n_seq: int, tokens: int, mean_kl: float, rng: np.random.Generator, seq_sd: float = 0.5,
                 token_sd: float = 1.0) -> list[np.ndarray]:
    """Per-token exact KL of ``n_seq`` sequences whose true mean KL per token is ``mean_kl``.

    Log-normal at both levels (KL is positive and right-skewed): a sequence's level has log-sd ``seq_sd`` (some
    prompts are harder for a quantized model than others), its tokens log-sd ``token_sd`` around it; both
    mean-one, so the expected per-token KL is ``mean_kl``. The defaults are the spread the KL interval's coverage
    was measured at (``benchmarks/kl_coverage.py``; its measured coverage is in ``verifier.kinds.logprob.cluster_ci``).
    """
    level = mean_kl * np.exp(seq_sd * rng.standard_normal(n_seq) - seq_sd ** 2 / 2)
    noise = np.exp(token_sd * rng.standard_normal((n_seq, tokens)) - token_sd ** 2 / 2)
    return list(level[:, None] * noise)


def score_kl_pair(sequences: Sequence[np.ndarray], suite: str = "lp") -> tuple[EndpointSuiteResult,
                                                                                  EndpointSuiteResult]:
    """(reference, candidate) results of a logprob suite whose candidate records hold exact per-token KL along one
    reference-sampled continuation per case (``exact_sample0``, as the built-in engine stores them), through the
    real ``score_logprob``: its path choice, ``kl_mean`` with the cluster bootstrap-t interval, and counts."""
    from verifier.kinds.logprob.scoring import score_logprob  # here: only the KL simulation needs it

    cases = tuple(_Case(f"{suite}-c{i}") for i in range(len(sequences)))
    records = []
    for case, kl in zip(cases, sequences):
        ref_lp = np.full(kl.size, -1.0)
        records.append(ExchangeRecord(
            request_hash=f"h-{case.id}", kind="logprob", suite=suite, case_id=case.id, endpoint="cand",
            variant=f"exact_{SAMPLE_PREFIX}0", status=200, attempts=1,
            extra={"kl": kl.tolist(), "ref_token_lp": ref_lp.tolist(), "cand_token_lp": (ref_lp - kl).tolist(),
                   "same_top": [True] * kl.size}))
    by = {r.endpoint: r for r in score_logprob(LogprobSuite(_Manifest(suite), cases), records, "ref", ["ref", "cand"])}
    return by["ref"], by["cand"]


def f1_lowered(p: np.ndarray, delta: float) -> np.ndarray:
    """Per-case trigger probabilities of a candidate whose trigger F1 against the reference is ``delta`` below a
    twin's, with the same expected trigger rate.

    Each endpoint decides each case independently, so with reference probabilities p and candidate q the expected
    F1 (TP, FP, FN summed over cases) is 2 sum(p q) / (sum p + sum q); a twin (q = p) reaches sum(p^2) / sum(p).
    q = (1 - lam) p + lam mean(p) keeps sum(q) = sum(p) and lowers that F1 by lam (sum(p^2)/sum(p) - mean(p)), so
    lam = delta / (sum(p^2)/sum(p) - mean(p)) (it must stay at most 1: the cases must be clear enough).
    """
    twin, rate = float((p * p).sum() / p.sum()), float(p.mean())
    lam = delta / (twin - rate)
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"an F1 drop of {delta} needs lam = {lam:.3f} outside [0, 1] for these cases")
    return (1.0 - lam) * p + lam * rate


def twin_agreement(p_alt: np.ndarray) -> float:
    """Expected exact argument agreement of two independent answers per call (one call per case): a case answers
    the alternative with probability a, so two answers agree with probability a^2 + (1 - a)^2."""
    return float((p_alt ** 2 + (1.0 - p_alt) ** 2).mean())
