"""An agent trial's state between steps, and its replay from the records of an interrupted trial (``--resume``).

Why a replay: a trial cut short (a budget cap refusing its next request, a killed process) used to restart from
step 0 as a new attempt on ``--resume``, sending and paying for every step again, and the restart was a second
draw of a trial whose first steps had already been measured. The state a trial needs for its next step is a pure
function of what it already recorded: the environment is deterministic (each recorded tool call executed again
gives the same result), and the conversation is the scenario's head plus one turn per step (the assistant's
calls and the tool results), trimmed as recorded. So the replay rebuilds that state, *checks* it against what each
step recorded (the prompt's size in characters and its number of messages before every step, and every call's
validity), and the trial continues at its first unrecorded step under the same attempt: the records are then
those of an uninterrupted trial. Where the check fails, or the records predate the fields the replay needs
(``window``, ``chars_per_token``), the trial restarts as a new attempt as before (scoring uses the finished one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from suites.agent.base import INVALID_KINDS, Environment
from suites.agent.scenarios import Scenario
from verifier.kinds.agent.conversation import Conversation, canonical_action, wire_safe
from verifier.records import Exchange, ExchangeRecord

#: ``extra`` keys every step record must hold for its trial to be continued rather than restarted.
REPLAY_KEYS = ("window", "chars_per_token", "trimmed_turns", "prompt_chars", "messages", "calls")


@dataclass
class TrialState:
    """What the next step of a trial starts from."""

    conv: Conversation
    env: Environment
    tools: list[dict[str, Any]]
    window: int | None = None  # the prompt window in force (narrowed by context-length errors)
    streak: int = 0  # invalid calls in a row
    used_ids: set[str] = field(default_factory=set)
    next_step: int = 0

    @classmethod
    def fresh(cls, scenario: Scenario, window: int | None) -> TrialState:
        env = scenario.make_env()
        tools = env.tools()
        return cls(conv=Conversation(scenario, tools), env=env, tools=tools, window=window)

    def take_calls(self, ex: Exchange, step: int) -> dict[str, Any]:
        """Execute a reply's tool calls in the environment and add the turn to the conversation; the step record's
        fields about the calls."""
        calls, actions, turn, tool_msgs = [], [], [], []
        for i, tc in enumerate(ex.tool_calls):
            # ids must pair each tool result with its call: replace missing or repeated ones
            call_id = tc.id if tc.id and tc.id not in self.used_ids else f"call_{step}_{i}"
            self.used_ids.add(call_id)
            outcome = self.env.call(tc.name or "", tc.arguments)
            self.streak = self.streak + 1 if not outcome.valid else 0
            calls.append({"name": tc.name, "valid": outcome.valid, "error_kind": outcome.error_kind})
            actions.append(canonical_action(tc.name, tc.arguments))
            turn.append({"id": call_id, "type": "function",
                         "function": {"name": wire_safe(tc.name) or "",
                                      "arguments": wire_safe(tc.arguments, json_text=True)}})
            tool_msgs.append({"role": "tool", "tool_call_id": call_id, "content": wire_safe(outcome.result_text)})
        self.conv.add_turn([{"role": "assistant", "content": wire_safe(ex.content), "tool_calls": turn}, *tool_msgs])
        n_invalid = sum(1 for c in calls if c["error_kind"] in INVALID_KINDS)
        first_error = next((c["error_kind"] for c in calls if c["error_kind"]), None)
        return {"n_calls": len(calls), "n_invalid": n_invalid, "valid": n_invalid == 0, "error_kind": first_error,
                "calls": calls, "actions": actions, "invalid_streak": self.streak}


def replay(scenario: Scenario, steps: Sequence[ExchangeRecord], max_prompt_tokens: int | None) -> TrialState | None:
    """The state after ``steps`` (one attempt's records of an unfinished trial), or None when it cannot be rebuilt
    exactly (a gap, a failed or finished step, a field missing, or a rebuilt prompt that differs from the one sent)."""
    ordered = sorted(steps, key=lambda r: r.step or 0)
    state = TrialState.fresh(scenario, None)
    for j, r in enumerate(ordered):
        x = r.extra
        if (r.step != j or not r.ok or not r.tool_calls or x.get("stop_reason")
                or any(k not in x for k in REPLAY_KEYS)):
            return None
        state.conv.drop_oldest(int(x["trimmed_turns"]))
        if state.conv.chars() != x["prompt_chars"] or len(state.conv.messages()) != x["messages"]:
            return None
        state.conv.chars_per_token = float(x["chars_per_token"])
        state.window = x["window"]
        if state.take_calls(r, j)["calls"] != x["calls"]:
            return None  # the environment answered otherwise than it did: not the same trial
        if max_prompt_tokens is not None:
            state.conv.trim(state.window)  # as the live step did after its calls
    state.next_step = len(ordered)
    return state if ordered and state.next_step < scenario.step_budget else None
