"""The records a request passes through inside the server: its plan before the engine (``ChatPlan``), what the
engine produced for it (``Generation``), and each piece a stream may send (``TextDelta``). Typed records, so the
chat, completion and streaming paths hand each other fields, not dicts."""

from __future__ import annotations

from dataclasses import dataclass, field

from reference_engine.constraints import (
    Constraint,
)
from reference_engine.engine import (
    DistributionEvent,
    ErrorEvent,
    FinishEvent,
    PromptLogprobsEvent,
    TokenEvent,
)


@dataclass
class ChatPlan:
    """What a chat request becomes before it reaches the engine: prompt ids, the text forced after the prompt (a
    named call's header), the decoding constraint, and whether the reply is parsed for tool calls."""

    prompt_ids: list[int]
    forced: str
    constraint: Constraint | None
    parse_tools: bool
    stop_token_ids: tuple[int, ...] = ()


@dataclass
class Generation:
    """Everything one request produced, gathered from engine events."""

    tokens: list[TokenEvent] = field(default_factory=list)
    prompt: PromptLogprobsEvent | None = None
    distribution: DistributionEvent | None = None
    finish: FinishEvent | None = None
    error: ErrorEvent | None = None

    def finished(self) -> FinishEvent:
        """How a generation that ended without an error finished (the server's collector returns no other)."""
        if self.finish is None:
            raise RuntimeError("the generation ended without a finish event")
        return self.finish


@dataclass
class TextDelta:
    """What a stream may send after one engine event: text that can no longer become part of a stop string
    (nor ends inside a multi-byte character), where it starts in the generated text, the token behind it
    (None on the final flush), and on the last step the FinishEvent, or an ErrorEvent instead of text."""

    text: str
    offset: int
    token: TokenEvent | None = None
    finish: FinishEvent | None = None
    error: ErrorEvent | None = None

    def finished(self) -> FinishEvent:
        """The FinishEvent of the final flush (``token`` None), which always carries one."""
        if self.finish is None:
            raise RuntimeError("the final flush of a stream carries no finish event")
        return self.finish
