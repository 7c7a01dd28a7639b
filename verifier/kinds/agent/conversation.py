"""An agent trial's conversation: the head that is always kept, the turns after it, and trimming to a window.

A module of its own so that the agent runner (:mod:`verifier.kinds.agent.kind`), the replay of an interrupted
trial on ``--resume`` (:mod:`verifier.kinds.agent.trial_state`) and ``training.evaluate`` keep a conversation
the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any

from suites.agent.scenarios import Scenario

DEFAULT_CHARS_PER_TOKEN = 4.0
TRIM_TO = 0.7  # when the window overflows, trim to this share of it (hysteresis: stable prefixes for caching)

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def wire_safe(text: str | None, *, json_text: bool = False) -> str | None:
    """Text the endpoint sent, made sendable again: a lone UTF-16 surrogate (which no UTF-8 request can carry) becomes
    its ``\\uXXXX`` escape inside JSON text (the very same JSON value) and U+FFFD in plain text. Without this, one
    such character in a reply made every later step of the trial fail before it was sent."""
    if not text or not _LONE_SURROGATE.search(text):
        return text
    if json_text:
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return _LONE_SURROGATE.sub("\ufffd", text)


def canonical_action(name: str | None, arguments: str) -> str:
    """``name(args)`` with arguments re-serialised canonically when they parse, raw otherwise (for divergence)."""
    try:
        args = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError):  # nested past the parser's depth: kept raw
        args = arguments
    return f"{name}({args})"


class Conversation:
    """System + goal (always kept) and the turns after them, with window-based trimming."""

    def __init__(self, scenario: Scenario, tools: list[dict[str, Any]]) -> None:
        self.head = [{"role": "system", "content": scenario.system}, {"role": "user", "content": scenario.goal}]
        self.turns: list[list[dict[str, Any]]] = []
        self.turn_chars: list[int] = []  # serialised size of each turn, computed once
        self.tools_chars = len(json.dumps(tools))
        self.head_chars = len(json.dumps(self.head))
        self.chars_per_token = DEFAULT_CHARS_PER_TOKEN
        self.dropped = 0  # turns trimmed so far (they never come back)

    def add_turn(self, messages: list[dict[str, Any]]) -> None:
        self.turns.append(messages)
        self.turn_chars.append(len(json.dumps(messages)))

    def chars(self) -> int:
        """Size of the prompt as sent (tools + messages), in characters of JSON."""
        return self.tools_chars + self.head_chars + sum(self.turn_chars)

    def estimate_tokens(self) -> int:
        return int(self.chars() / self.chars_per_token) + 1

    def calibrate(self, prompt_tokens: int | None, chars: int) -> None:
        """Learn chars/token from what the endpoint counted for the prompt just sent."""
        if prompt_tokens and prompt_tokens > 0 and chars > 0:
            self.chars_per_token = chars / prompt_tokens

    def trim(self, window_tokens: int | None) -> int:
        """When over ``window_tokens``, drop oldest turns down to ``TRIM_TO`` of it (keeps the last turn).

        Trimming in chunks rather than one turn per step keeps the prompt prefix stable for several steps, so
        prefix caches (the built-in engine's, providers') keep hitting. Returns the number of turns dropped.
        """
        if window_tokens is None or self.estimate_tokens() <= window_tokens:
            return 0
        dropped = 0
        target = int(window_tokens * TRIM_TO)
        while len(self.turns) > 1 and self.estimate_tokens() > target:
            self.turns.pop(0)
            self.turn_chars.pop(0)
            dropped += 1
        self.dropped += dropped
        return dropped

    def drop_oldest(self, n: int) -> None:
        """Drop the ``n`` oldest turns (a replay repeating the trims a step recorded, ``trimmed_turns``)."""
        for _ in range(min(n, len(self.turns))):
            self.turns.pop(0)
            self.turn_chars.pop(0)
        self.dropped += n

    def messages(self) -> list[dict[str, Any]]:
        return self.head + [m for turn in self.turns for m in turn]

    def window_after_context_error(self, context_len: int | None, prompt_tokens: int | None, sent_chars: int,
                                   max_tokens: int, window: int | None) -> int:
        """The window to trim to after the endpoint refused the prompt of ``sent_chars`` as too long.

        90 % of the stated context length minus ``max_tokens`` (room for the reply) when the error states it and
        that is below our estimate of the refused prompt; otherwise 3/4 of that estimate, since our chars-per-token
        guess was evidently off. Never wider than a window already in force.
        """
        if prompt_tokens:
            self.calibrate(prompt_tokens, sent_chars)
        target = int(self.estimate_tokens() * 0.75)
        if context_len and context_len > max_tokens:
            stated = int((context_len - max_tokens) * 0.9)
            if stated < self.estimate_tokens():  # else our estimate is off: shrink instead
                target = stated
        return max(1, min(window or target, target))
