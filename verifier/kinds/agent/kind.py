"""The ``agent`` suite kind: drive long-horizon scenarios against endpoints and record every step.

The loop per trial: send conversation + tools -> read the reply's ``tool_calls`` -> execute each call in the
scenario's environment -> append the assistant message and one tool message per call -> repeat. A trial stops on

* ``final_answer``: a reply without tool calls (``truncated_reply`` when it was cut off by ``max_tokens``);
* ``step_budget``: the scenario's budget of model requests is used up;
* ``invalid_streak``: ``max_invalid_streak`` consecutive invalid tool calls (malformed JSON, unknown tool, schema);
* ``context_limit``: the endpoint said the prompt is too long and trimming cannot help, or the next prompt would
  exceed the configured ``max_prompt_tokens``;
* ``endpoint_error``: the request failed for another reason after the client's retries (a provider fault: scoring
  reports such trials as endpoint errors, outside task success; see :mod:`verifier.kinds.agent.scoring`). Any exception
  while handling a step (a reply no parser foresaw) is such a failure too: it is recorded, never fatal to the suite.

Every request is one :class:`ExchangeRecord` (kind ``agent_step``, ``repeat`` = trial, ``step`` = index). ``extra``
holds ``attempt``, ``env``, ``horizon``, ``messages`` / ``prompt_chars`` / ``trimmed_turns`` (what was sent),
``n_calls``, ``n_invalid``, ``valid`` (all calls of the step well-formed; absent for a reply without calls),
``error_kind`` (first error of the step, ``rejected`` included), ``calls`` (name, valid, error_kind per call),
``actions`` (canonical ``name(args)`` per call, for divergence) and ``invalid_streak``; the last record of a trial
adds ``stop_reason``, ``success`` (the environment's check on the final state), ``tool_calls_total`` and
``invalid_total``.

Resuming: a trial with a record carrying a stop reason is finished and never re-sent. A trial that was interrupted
(a budget cap refused its next request, the process was killed) continues at its first unrecorded step, its state
replayed from its records and checked against them (:mod:`verifier.kinds.agent.trial_state`; each step records
the ``window`` and ``chars_per_token`` the replay needs), so nothing is sent twice. Where the replay cannot be
exact it restarts from scratch as a new *attempt* (``extra.attempt``; ``variant`` = ``attempt<N>`` so record keys
stay unique in the append-only store); scoring uses the finished attempt.

Context management (so long horizons work on small-context models): the system prompt and the goal are always
kept; when ``window_tokens`` is set and the estimated prompt exceeds it, the oldest turns (an assistant message
with its tool results, dropped together) are removed until the estimate is under 70% of the window (so the
prefix then stays stable for a few steps and prefix caches keep hitting), always keeping the latest turn. Prompt size
is estimated
from characters, calibrated by the ``usage.prompt_tokens`` the endpoint reported for the previous request (4 chars
per token before the first report). With ``on_context_error="trim"`` (default) an endpoint's "context length
exceeded" error sets the window (to 90% of the stated context length minus ``max_tokens`` when the message states
it, else 3/4 of the failed prompt's estimate) and the step is re-sent (at most 3 times); the learnt window is
kept for that endpoint's later trials.
The scenarios are built so that the latest turns carry what the next call needs.

Options (``ctx.options``): ``horizon`` (int or list: keep these horizons), ``trials`` (default ``ctx.repeats``),
``limit`` (first N scenarios), ``temperature`` (default 0), ``max_tokens`` (default 256), ``max_invalid_streak``
(default 5), ``window_tokens``, ``max_prompt_tokens``, ``on_context_error`` (``trim``/``stop``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suites.agent.scenarios import SUITE_VERSION, Scenario, builtin_suite, content_hash, load_scenario_file
from verifier.kinds.agent.conversation import (  # noqa: F401 - re-exported: training.evaluate and tests use them
    DEFAULT_CHARS_PER_TOKEN,
    TRIM_TO,
    Conversation,
    canonical_action,
    wire_safe,
)
from verifier.kinds.agent.scoring import ENDPOINT_ERROR_STOP, score_records
from verifier.kinds.agent.trial_state import TrialState, replay
from verifier.records import Exchange, ExchangeRecord, SuiteManifest
from verifier.run.exchange_guard import failed_exchange, guarded
from verifier.run.protocol import RunContext
from verifier.run.request_plan import PlannedRequest
from verifier.run.summary import EndpointSuiteResult

BUILTIN = ("agent-smoke", "agent-long")
_CONTEXT_ERROR = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long|too long|"
    r"exceeds? (the )?(model'?s? )?(max|maximum|context)|max_model_len|context_length_exceeded",
    re.IGNORECASE,
)


@dataclass
class AgentOptions:
    """Kind-specific options, parsed once from ``ctx.options`` (unknown keys are ignored: other kinds use them)."""

    horizons: list[int] | None = None
    trials: int = 1
    limit: int | None = None
    temperature: float = 0.0
    max_tokens: int = 256
    max_invalid_streak: int = 5
    window_tokens: int | None = None
    max_prompt_tokens: int | None = None
    on_context_error: str = "trim"

    @classmethod
    def parse(cls, options: dict[str, Any], default_trials: int = 1) -> AgentOptions:
        def num(key: str, typ: type, default: Any) -> Any:
            value = options.get(key)
            if value is None:
                return default
            try:
                out = typ(value)
            except (TypeError, ValueError):
                raise ValueError(f"agent option {key}: expected {typ.__name__}, got {value!r}") from None
            if isinstance(out, (int, float)) and out < 0:
                raise ValueError(f"agent option {key}: must be >= 0, got {value!r}")
            return out

        horizon = options.get("horizon")
        if horizon is None or horizon == []:
            horizons = None
        else:
            items = horizon if isinstance(horizon, (list, tuple)) else str(horizon).split(",")
            try:
                horizons = [int(h) for h in items]
            except ValueError:
                raise ValueError(f"agent option horizon: expected integers, got {horizon!r}") from None
        mode = str(options.get("on_context_error", "trim"))
        if mode not in ("trim", "stop"):
            raise ValueError(f"agent option on_context_error: expected trim or stop, got {mode!r}")
        trials = num("trials", int, default_trials)
        if trials < 1:
            raise ValueError("agent option trials: must be >= 1")
        return cls(
            horizons=horizons,
            trials=trials,
            limit=num("limit", int, None),
            temperature=num("temperature", float, 0.0),
            max_tokens=num("max_tokens", int, 256),
            max_invalid_streak=max(1, num("max_invalid_streak", int, 5)),
            window_tokens=num("window_tokens", int, None),
            max_prompt_tokens=num("max_prompt_tokens", int, None),
            on_context_error=mode,
        )


@dataclass
class AgentSuite:
    """A loaded agent suite: what the run executes (``cases``) and what it names (``manifest``)."""

    manifest: SuiteManifest
    cases: list[Scenario]
    options: AgentOptions = field(default_factory=AgentOptions)


_CONTEXT_LEN = re.compile(r"context length (?:is |of )?(\d+)", re.IGNORECASE)
_PROMPT_LEN = re.compile(r"prompt \((\d+) tokens\)|(\d+) tokens? in the messages|prompt has (\d+) tokens",
                         re.IGNORECASE)


def context_error_sizes(ex: Exchange) -> tuple[int | None, int | None]:
    """(context length, prompt tokens) when the error message states them (vLLM, OpenAI, the built-in engine)."""
    return context_sizes_in(ex.error_message or "")


def context_sizes_in(text: str) -> tuple[int | None, int | None]:
    """(context length, prompt tokens) stated in a context-length error's text, each None where absent."""
    ctx_m, prompt_m = _CONTEXT_LEN.search(text), _PROMPT_LEN.search(text)
    ctx_len = int(ctx_m.group(1)) if ctx_m else None
    prompt = next((int(g) for g in prompt_m.groups() if g), None) if prompt_m else None
    return ctx_len, prompt


def is_context_error(ex: Exchange) -> bool:
    """True when an endpoint refused the request because the prompt is too long."""
    if ex.status not in (400, 413, 422) and ex.error_class not in ("client_error",):
        return False
    text = (ex.error_message or "") + " " + json.dumps(ex.response or {})
    return bool(_CONTEXT_ERROR.search(text))


#: re-sends of one step after trimming for a context-length error (the first try not counted)
MAX_CONTEXT_RETRIES = 3


@dataclass
class SentStep:
    """One agent step's request as finally sent, and what keeping its prompt inside the window took."""

    exchange: Exchange
    messages: int  # messages in the prompt sent last
    sent_chars: int  # its size (``Conversation.chars``)
    window: int | None  # the prompt window in force after the step: narrower than before if a context error taught it
    dropped: int  # turns trimmed for this step
    context_retries: int
    context_error: str | None  # the last context-length error's message (first 200 characters), if any


async def send_step(conv: Conversation, chat: Callable[[dict[str, Any]], Awaitable[Exchange]],
                    request: dict[str, Any], *, window: int | None, max_tokens: int,
                    trim_on_error: bool = True) -> SentStep:
    """Trim ``conv`` to ``window``, send it with ``request`` (tools, sampling), and when the endpoint refuses the
    prompt as too long, narrow the window from what the error says, trim and re-send, at most
    ``MAX_CONTEXT_RETRIES`` times.

    Why one function: the verifier's agent runner and ``training.evaluate`` (which measures the shipped model)
    must keep an agent's context the same way, or the model card's horizon figures would measure another
    policy than ``verifier run`` does.
    """
    dropped = conv.trim(window)
    retries, error = 0, None
    while True:
        sent_chars = conv.chars()
        messages = conv.messages()
        ex = await chat({"messages": messages, **request})
        if ex.ok or not is_context_error(ex):
            break
        error = (ex.error_message or "")[:200]
        if not trim_on_error or len(conv.turns) <= 1 or retries >= MAX_CONTEXT_RETRIES:
            break
        retries += 1
        ctx_len, prompt_tokens = context_error_sizes(ex)
        window = conv.window_after_context_error(ctx_len, prompt_tokens, sent_chars, max_tokens, window)
        dropped += conv.trim(window)
    return SentStep(ex, len(messages), sent_chars, window, dropped, retries, error)


@dataclass
class _TrialPlan:
    scenario: Scenario
    endpoint: str
    trial: int
    attempt: int
    state: TrialState | None = None  # an interrupted attempt's replayed state: continue it rather than restart


class AgentKind:
    """The ``agent`` SuiteKind (see docs/CONTRACTS.md)."""

    kind = "agent"

    # ---- loading -------------------------------------------------------------------------------------
    def load(self, ref: str, options: dict[str, Any]) -> AgentSuite:
        """``ref``: ``agent-smoke``, ``agent-long`` or a JSONL file of scenario specs (see scenarios.py)."""
        opts = AgentOptions.parse(options or {}, default_trials=int((options or {}).get("trials") or 1))
        if ref in BUILTIN:
            scenarios, source, name = builtin_suite(ref), "builtin", ref
        else:
            path = Path(ref)
            if not path.is_file():
                raise ValueError(f"agent suite {ref!r}: not a built-in suite ({', '.join(BUILTIN)}) nor a file")
            scenarios, source, name = load_scenario_file(path), str(path), path.stem
        if opts.horizons is not None:
            scenarios = [s for s in scenarios if s.horizon in opts.horizons]
            if not scenarios:
                raise ValueError(f"agent suite {ref!r}: no scenario has horizon in {opts.horizons}")
        if opts.limit is not None:
            scenarios = scenarios[: opts.limit]
        manifest = SuiteManifest(
            name=name, version=SUITE_VERSION, kind="agent", case_count=len(scenarios),
            content_hash=content_hash(scenarios), source=source,
        )
        return AgentSuite(manifest=manifest, cases=scenarios, options=opts)

    def _options(self, suite: AgentSuite, ctx: RunContext) -> AgentOptions:
        opts = ctx.options or {}
        return AgentOptions.parse(opts, default_trials=int(opts.get("trials") or getattr(ctx, "repeats", 1) or 1))

    def planned_exchanges(self, suite: AgentSuite, ctx: RunContext) -> int:
        opts = self._options(suite, ctx)
        per_trial = sum(s.horizon + 1 for s in suite.cases)  # oracle length + final answer: an estimate
        return per_trial * opts.trials * len(ctx.endpoints)

    def planned_requests(self, suite: AgentSuite, ctx: RunContext) -> list[PlannedRequest]:
        """The worst case: every trial uses its scenario's whole step budget, step k carrying k earlier turns."""
        opts = self._options(suite, ctx)
        out = []
        for s in suite.cases:
            first = {"messages": Conversation(s, []).head, "tools": s.make_env().tools()}
            out += [PlannedRequest(body=first, count=opts.trials, max_tokens=opts.max_tokens, earlier_turns=k)
                    for k in range(s.step_budget)]
        return out

    # ---- running -------------------------------------------------------------------------------------
    def _plan(self, suite: AgentSuite, ctx: RunContext, opts: AgentOptions) -> list[_TrialPlan]:
        """Trials still to run; finished trials are skipped. An interrupted trial continues its attempt from its
        first unrecorded step when its records replay exactly (:mod:`verifier.kinds.agent.trial_state`), else it
        restarts as a new attempt."""
        name = suite.manifest.name
        attempts: dict[tuple[str, str, int], int] = {}
        finished: set[tuple[str, str, int]] = set()
        steps: dict[tuple[str, str, int, int], list[ExchangeRecord]] = {}
        for r in ctx.store.read(kind="agent_step", suite=name):
            key = (r.endpoint, r.case_id, r.repeat)
            attempt = int(r.extra.get("attempt", 0))
            attempts[key] = max(attempts.get(key, -1), attempt)
            steps.setdefault((*key, attempt), []).append(r)
            if r.extra.get("stop_reason"):
                finished.add(key)
        plans = []
        for endpoint in ctx.endpoints:
            for scenario in suite.cases:
                for trial in range(opts.trials):
                    key = (endpoint, scenario.id, trial)
                    if key in finished:
                        continue
                    last = attempts.get(key, -1)
                    state = replay(scenario, steps[(*key, last)], opts.max_prompt_tokens) if last >= 0 else None
                    plans.append(_TrialPlan(scenario, endpoint, trial, last if state else last + 1, state))
        return plans

    async def run(self, suite: AgentSuite, ctx: RunContext) -> None:
        opts = self._options(suite, ctx)
        plans = self._plan(suite, ctx, opts)
        eps = ctx.endpoints  # --resume: steps already recorded count in this run's progress
        ctx.progress.advance_resumed(r for r in ctx.store.read(kind="agent_step", suite=suite.manifest.name)
                                     if r.endpoint in eps)
        learned: dict[str, int] = {}  # endpoint -> prompt window learnt from its context-length errors
        await asyncio.gather(*(self._guarded_trial(suite, ctx, opts, p, learned) for p in plans))

    async def _guarded_trial(self, suite: AgentSuite, ctx: RunContext, opts: AgentOptions, plan: _TrialPlan,
                             learned: dict[str, int]) -> None:
        """One trial; an exception out of it ends that trial with a classified record, never the suite."""
        steps: list[int] = []
        try:
            await self._run_trial(suite, ctx, opts, plan, learned, steps)
        except Exception as e:  # noqa: BLE001 - one trial's failure is a record, not a dead suite
            step = (steps[-1] + 1) if steps else (plan.state.next_step if plan.state else 0)
            ex = failed_exchange(e, {"scenario": plan.scenario.id, "step": step})
            ctx.store.append(ExchangeRecord(
                **ex.model_dump(), kind="agent_step", suite=suite.manifest.name, case_id=plan.scenario.id,
                repeat=plan.trial, endpoint=plan.endpoint, step=step,
                variant=None if plan.attempt == 0 else f"attempt{plan.attempt}",
                extra={"attempt": plan.attempt, "env": plan.scenario.env, "horizon": plan.scenario.horizon,
                       "n_calls": 0, "n_invalid": 0, "calls": [], "actions": [], "stop_reason": ENDPOINT_ERROR_STOP,
                       "success": False}))
            ctx.progress.advance(1, error=True)

    async def _run_trial(
        self, suite: AgentSuite, ctx: RunContext, opts: AgentOptions, plan: _TrialPlan, learned: dict[str, int],
        steps_written: list[int] | None = None,
    ) -> None:
        scenario = plan.scenario
        client = ctx.clients[plan.endpoint]
        # a window learnt from this endpoint's context error applies to its later trials too (not to others)
        learnt = min((w for w in (opts.window_tokens, learned.get(plan.endpoint)) if w), default=None)
        state = plan.state or TrialState.fresh(scenario, learnt)
        conv, env = state.conv, state.env
        window = min((w for w in (state.window, learnt) if w), default=None)
        request = {"tools": state.tools, "temperature": opts.temperature, "max_tokens": opts.max_tokens}

        def chat(body: dict[str, Any]) -> Awaitable[Exchange]:
            return guarded(client.chat(body), body, stream=bool(client.config.stream))

        for step in range(state.next_step, scenario.step_budget):
            sent = await send_step(conv, chat, request, window=window, max_tokens=opts.max_tokens,
                                   trim_on_error=opts.on_context_error == "trim")
            ex, window = sent.exchange, sent.window
            if sent.context_retries and window is not None:
                learned[plan.endpoint] = min(learned.get(plan.endpoint, window), window)
            extra: dict[str, Any] = {
                "attempt": plan.attempt, "env": scenario.env, "horizon": scenario.horizon,
                "messages": sent.messages, "trimmed_turns": sent.dropped, "prompt_chars": sent.sent_chars,
            }
            if sent.context_retries or sent.context_error:
                extra.update(context_retries=sent.context_retries, context_error=sent.context_error)
            stop: str | None = None
            if not ex.ok:
                stop = "context_limit" if is_context_error(ex) else ENDPOINT_ERROR_STOP
                extra.update(n_calls=0, n_invalid=0, calls=[], actions=[])
            else:
                conv.calibrate(ex.usage.prompt_tokens, sent.sent_chars)
                if not ex.tool_calls:
                    # a reply cut off by max_tokens is not an answer: often a tool call that never closed
                    stop = "truncated_reply" if ex.finish_reason == "length" else "final_answer"
                    extra.update(n_calls=0, n_invalid=0, calls=[], actions=[])
                else:
                    extra.update(state.take_calls(ex, step))
                    if state.streak >= opts.max_invalid_streak:
                        stop = "invalid_streak"
                    elif step + 1 >= scenario.step_budget:
                        stop = "step_budget"
                    elif opts.max_prompt_tokens is not None:
                        conv.trim(window)
                        if conv.estimate_tokens() > opts.max_prompt_tokens:
                            stop = "context_limit"
            extra.update(window=window, chars_per_token=conv.chars_per_token)  # what a --resume replay needs
            if stop is not None:
                extra.update(stop_reason=stop, success=env.check(), tool_calls_total=len(env.events),
                             invalid_total=sum(1 for e in env.events if not e.valid))
            record = ExchangeRecord(
                **ex.model_dump(), kind="agent_step", suite=suite.manifest.name, case_id=scenario.id,
                repeat=plan.trial, endpoint=plan.endpoint, step=step,
                variant=None if plan.attempt == 0 else f"attempt{plan.attempt}", extra=extra,
            )
            ctx.store.append(record)
            if steps_written is not None:
                steps_written.append(step)
            ctx.progress.advance(1, error=not ex.ok, retried=max(0, ex.attempts - 1))
            if stop is not None:
                return

    # ---- scoring -------------------------------------------------------------------------------------
    def score(
        self, suite: AgentSuite, records: list[ExchangeRecord], reference: str, endpoints: list[str]
    ) -> list[EndpointSuiteResult]:
        return score_records(records, suite.manifest.name, reference, endpoints)


AGENT_KIND = AgentKind()
