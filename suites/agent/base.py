"""The environment interface every agent-suite world implements.

An environment is a small deterministic, stateful Python world (a file system, a ticket queue, ...) that an LLM
drives through tools with JSON Schemas. The same ``(seed, horizon)`` always yields the same initial state, the same
tool results and the same success check, so two endpoints are judged on identical tasks and a trajectory can be
replayed exactly.

Tool calls are validated the way a real agent framework would: arguments that are not a JSON object, unknown tool
names and JSON-Schema violations are *invalid* calls and get an error tool result (so the model may recover or
compound the error). A valid call the world refuses (closing a ticket that was never fetched) is a *rejected*
call: the model's formatting was fine, its plan was not. Every call, of either sort, is kept in ``events``.
"""

from __future__ import annotations

import hashlib
import json
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import jsonschema

#: error kinds of invalid calls (formatting / schema problems)
MALFORMED = "malformed_json"
UNKNOWN_TOOL = "unknown_tool"
SCHEMA = "schema_violation"
#: error kind of a valid call the world refused
REJECTED = "rejected"
INVALID_KINDS = frozenset({MALFORMED, UNKNOWN_TOOL, SCHEMA})


class Rejected(Exception):
    """Raised by a tool handler when a well-formed call is not allowed in the current state."""


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call produced. ``valid`` is about the call's form (JSON, name, schema), not its wisdom."""

    valid: bool
    error_kind: str | None
    result_text: str


@dataclass(frozen=True)
class Action:
    """A tool call as the oracle would make it: name plus arguments (a dict, serialised on demand)."""

    name: str
    arguments: dict[str, Any]

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class ToolEvent:
    """One call as the environment saw it (kept for audit and for the runner's per-step records)."""

    name: str
    arguments: str
    valid: bool
    error_kind: str | None


@dataclass(frozen=True)
class Tool:
    """A tool: its OpenAI-facing description and JSON Schema, and the bound handler that does the work."""

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[[dict[str, Any]], str]

    def openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def obj_schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A strict object schema (no extra keys), the shape every tool here takes."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def split_horizon(horizon: int, small: int, large: int, fixed: int, rng: random.Random) -> tuple[int, int]:
    """Choose counts ``(a, b)`` with ``fixed + a*small + b*large == horizon``, ``a >= 1``.

    Environments mix items that cost ``small`` and ``large`` tool calls so that *every* horizon on the ladder is hit
    exactly; which valid mix is used depends on the seed. Raises ``ValueError`` when the horizon cannot be met.
    """
    target = horizon - fixed
    options = [
        (a, b)
        for b in range(0, target // large + 1)
        for a in [(target - b * large) // small]
        if a >= 1 and a * small + b * large == target
    ]
    if not options:
        raise ValueError(f"horizon {horizon} cannot be built from items of {small} and {large} calls (+{fixed})")
    # prefer mixes with a modest share of large items (they are the ones that test rule-following)
    options.sort(key=lambda ab: abs(ab[1] - max(1, (ab[0] + ab[1]) // 4)))
    return options[rng.randrange(min(3, len(options)))]


class Environment(ABC):
    """Base class: subclasses build state in ``__init__`` and register tools in ``_build_tools``."""

    #: environment family name used in scenario ids and the registry
    name: ClassVar[str]
    #: the smallest horizon this family can express exactly
    min_horizon: ClassVar[int] = 6

    def __init__(self, seed: int, horizon: int) -> None:
        self.seed = seed
        self.horizon = horizon
        self.rng = random.Random(f"{self.name}:{seed}:{horizon}")
        self.events: list[ToolEvent] = []
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        self.setup()
        for tool in self._build_tools():
            self._tools[tool.name] = tool
            self._validators[tool.name] = jsonschema.Draft202012Validator(tool.parameters)

    # ---- what subclasses provide -------------------------------------------------------------
    @abstractmethod
    def setup(self) -> None:
        """Build the initial state from ``self.rng`` so that oracle solution length == ``self.horizon``."""

    @abstractmethod
    def _build_tools(self) -> list[Tool]:
        """The tools of this world, handlers bound to ``self``."""

    @abstractmethod
    def goal(self) -> str:
        """The plain-language task, enough for any capable LLM to solve it with the tools."""

    @abstractmethod
    def check(self) -> bool:
        """Success check on the final state."""

    @abstractmethod
    def next_action(self) -> Action | None:
        """Oracle: the next call of a shortest solution from the *current* state (None when the task is done).

        Works from any state a sequence of calls can reach, so scripted policies can inject errors and still finish.
        """

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """The full state as plain JSON data (for digests and debugging)."""

    # ---- shared machinery ----------------------------------------------------------------------
    def tools(self) -> list[dict[str, Any]]:
        """Tools in OpenAI ``tools`` format, in a fixed order."""
        return [t.openai() for t in self._tools.values()]

    def tool_schema(self, name: str) -> dict[str, Any]:
        """The JSON Schema of one tool's parameters."""
        return self._tools[name].parameters

    def call(self, name: str, arguments: str) -> ToolOutcome:
        """Execute one tool call given as the model sent it (raw argument string). Never raises."""
        outcome = self._call(name, arguments)
        self.events.append(ToolEvent(name, arguments, outcome.valid, outcome.error_kind))
        return outcome

    def _call(self, name: str, arguments: str) -> ToolOutcome:
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools)
            return ToolOutcome(False, UNKNOWN_TOOL, f"error: unknown tool {name!r}. Tools: {known}.")
        if not isinstance(arguments, str):  # the wire carries text; anything else cannot be parsed
            return ToolOutcome(False, MALFORMED, "error: arguments are not valid JSON (not text).")
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return ToolOutcome(False, MALFORMED, f"error: arguments are not valid JSON ({exc.msg}).")
        except RecursionError:
            return ToolOutcome(False, MALFORMED, "error: arguments are nested too deep to read.")
        if not isinstance(args, dict):
            return ToolOutcome(False, MALFORMED, "error: arguments must be a JSON object.")
        error = jsonschema.exceptions.best_match(self._validators[name].iter_errors(args))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "arguments"
            return ToolOutcome(False, SCHEMA, f"error: {name} {where}: {error.message}.")
        try:
            return ToolOutcome(True, None, tool.handler(args))
        except Rejected as exc:
            return ToolOutcome(True, REJECTED, f"error: {exc}")

    def run_action(self, action: Action) -> ToolOutcome:
        """Convenience for oracles and tests: execute an :class:`Action`."""
        return self.call(action.name, action.arguments_json())

    def solve(self, max_calls: int | None = None) -> int:
        """Drive the oracle to the end; returns the number of calls made. Used by tests and data generation."""
        limit = max_calls if max_calls is not None else self.horizon * 4 + 10
        n = 0
        while (action := self.next_action()) is not None:
            if n >= limit:
                raise RuntimeError(f"{self.name}: oracle did not finish within {limit} calls")
            outcome = self.run_action(action)
            if not outcome.valid or outcome.error_kind is not None:
                raise RuntimeError(f"{self.name}: oracle call {action} failed: {outcome.result_text}")
            n += 1
        return n

    def state_digest(self) -> str:
        """sha256 of the canonical state: part of the suite's content hash, so changed generators change it."""
        blob = json.dumps(self.state(), sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()


@dataclass
class Counter:
    """A tiny id allocator that keeps generated ids unique and deterministic."""

    used: set[str] = field(default_factory=set)

    def make(self, rng: random.Random, prefix: str, digits: int = 4) -> str:
        while True:
            ident = f"{prefix}{rng.randrange(10 ** (digits - 1), 10**digits)}"
            if ident not in self.used:
                self.used.add(ident)
                return ident
