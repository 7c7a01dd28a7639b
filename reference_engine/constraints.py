"""Constrained decoding: which next tokens keep the output well-formed.

Used for `tool_choice` "required" / a named function (the reply must be one tool call: the call header, a JSON object
of arguments, the closing tag, end of turn), `response_format: {"type": "json_object"}` (a JSON object, then end of
turn) and `tool_choice` "none" (the call tag is banned).

Why hand-written and not a grammar library (xgrammar, llguidance, as vLLM uses): the only grammar needed is "one
well-formed JSON object", a byte-level pushdown automaton of about a hundred lines, and the engine stays free of a
compiled dependency. It checks JSON syntax, not a JSON Schema: the arguments' *content* stays the model's own choice,
which is what the verifier measures.

The automaton runs on bytes, so tokens that split a multi-byte character are handled like any other string bytes.
Masks are cached per automaton state (states repeat: "inside a string at depth 2" is one state), so a vocabulary is
scanned once per distinct state, not once per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

# ---- the JSON automaton ---------------------------------------------------------------------------------------------
# A state is (stack, mode, key, extra): `stack` holds the open containers ("o" object, "a" array), `mode` what may come
# next, `key` whether the open string is an object key, `extra` the rest of a literal (true/false/null) or the number
# of hex digits a \u escape still needs.
(VALUE, VALUE_OR_CLOSE, OBJECT_ONLY, KEY_OR_CLOSE, KEY, COLON, AFTER, STRING, ESCAPE, HEX, LITERAL, DONE,
 N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP) = range(20)

State = tuple[str, int, bool, Any]  # extra: bytes (a literal's rest), int (hex digits left) or None, by mode
ROOT_OBJECT: State = ("", OBJECT_ONLY, False, None)      # the whole output must be one JSON object
_WS = frozenset(b" \t\n\r")
_DIGITS = frozenset(b"0123456789")
_NUMBER_END_OK = {N_ZERO, N_INT, N_FRAC, N_EXP}


def _after_value(stack: str) -> State:
    return (stack, AFTER, False, None) if stack else ("", DONE, False, None)


def _start_value(stack: str, c: int) -> State | None:
    if c == 0x7B:                                        # {
        return (stack + "o", KEY_OR_CLOSE, False, None)
    if c == 0x5B:                                        # [
        return (stack + "a", VALUE_OR_CLOSE, False, None)
    if c == 0x22:                                        # "
        return (stack, STRING, False, None)
    if c == 0x2D:                                        # -
        return (stack, N_MINUS, False, None)
    if c == 0x30:
        return (stack, N_ZERO, False, None)
    if c in _DIGITS:
        return (stack, N_INT, False, None)
    for word in (b"true", b"false", b"null"):
        if c == word[0]:
            return (stack, LITERAL, False, word[1:])
    return None


def _number(stack: str, mode: int, c: int) -> State | None:
    nxt = {
        N_MINUS: {"0": N_ZERO, "d": N_INT},
        N_ZERO: {".": N_DOT, "e": N_E},
        N_INT: {"0": N_INT, "d": N_INT, ".": N_DOT, "e": N_E},
        N_DOT: {"0": N_FRAC, "d": N_FRAC},
        N_FRAC: {"0": N_FRAC, "d": N_FRAC, "e": N_E},
        N_E: {"0": N_EXP, "d": N_EXP, "+": N_ESIGN},
        N_ESIGN: {"0": N_EXP, "d": N_EXP},
        N_EXP: {"0": N_EXP, "d": N_EXP},
    }[mode]
    cls = "0" if c == 0x30 else "d" if c in _DIGITS else "." if c == 0x2E else "e" if c in b"eE" else \
        "+" if c in b"+-" else None
    if cls in nxt:
        return (stack, nxt[cls], False, None)
    if mode in _NUMBER_END_OK:                           # the number ended: this byte belongs to what follows
        return step((stack, AFTER, False, None), c)
    return None


def step(state: State, c: int) -> State | None:
    """The state after one more byte, or None when the byte cannot continue a well-formed JSON object."""
    stack, mode, key, extra = state
    if mode == STRING:
        if c == 0x22:
            return (stack, COLON, False, None) if key else _after_value(stack)
        if c == 0x5C:
            return (stack, ESCAPE, key, None)
        return None if c < 0x20 else state
    if mode == ESCAPE:
        if c in b'"\\/bfnrt':
            return (stack, STRING, key, None)
        return (stack, HEX, key, 4) if c == 0x75 else None
    if mode == HEX:
        if c not in b"0123456789abcdefABCDEF":
            return None
        return (stack, STRING, key, None) if extra == 1 else (stack, HEX, key, extra - 1)
    if mode == LITERAL:
        if c != extra[0]:
            return None
        return _after_value(stack) if len(extra) == 1 else (stack, LITERAL, False, extra[1:])
    if mode >= N_MINUS:
        return _number(stack, mode, c)
    if mode == DONE:
        return None
    if c in _WS:
        return state if stack or mode != OBJECT_ONLY else None   # the whole output starts at its "{"
    if mode == OBJECT_ONLY:
        return (stack + "o", KEY_OR_CLOSE, False, None) if c == 0x7B else None
    if mode == VALUE:
        return _start_value(stack, c)
    if mode == VALUE_OR_CLOSE:
        return _after_value(stack[:-1]) if c == 0x5D else _start_value(stack, c)
    if mode in (KEY_OR_CLOSE, KEY):
        if c == 0x22:
            return (stack, STRING, True, None)
        return _after_value(stack[:-1]) if (c == 0x7D and mode == KEY_OR_CLOSE) else None
    if mode == COLON:
        return (stack, VALUE, False, None) if c == 0x3A else None
    if mode == AFTER:
        top = stack[-1]
        if c == 0x2C:
            return (stack, KEY if top == "o" else VALUE, False, None)
        if (c == 0x7D and top == "o") or (c == 0x5D and top == "a"):
            return _after_value(stack[:-1])
    return None


def feed(state: State | None, data: bytes) -> State | None:
    for c in data:
        if state is None:
            return None
        state = step(state, c)
    return state


def arguments_state(header: str) -> State:
    """The state after a tool-call header such as ``{"name": "f", "arguments":``: inside the call object, where the
    arguments must be an object (not any JSON value)."""
    state = feed(ROOT_OBJECT, header.encode())
    if state is None or state[1] != VALUE:
        raise ValueError(f"{header!r} does not end where a JSON value starts")
    return (state[0], OBJECT_ONLY, False, None)


# ---- token level ----------------------------------------------------------------------------------------------------
class TokenTable:
    """The vocabulary as bytes, and per-state masks of the tokens a JSON object may continue with.

    Built once per served model. `json_banned` are tokens never allowed inside JSON: special tokens (end of turn
    would cut the object) and any token whose text holds a tool-call tag (it would end the call inside a string).
    """

    def __init__(self, token_bytes: list[bytes | None], json_banned: set[int], eos_ids: set[int]) -> None:
        self.size = len(token_bytes)
        self.token_bytes = token_bytes
        self.json_banned = json_banned
        self.eos_ids = sorted(i for i in eos_ids if i < self.size)
        self._masks: dict[State, torch.Tensor] = {}

    def only(self, ids) -> torch.Tensor:
        mask = torch.zeros(self.size, dtype=torch.bool)
        mask[[i for i in ids if 0 <= i < self.size]] = True
        return mask

    def json_mask(self, state: State) -> torch.Tensor:
        mask = self._masks.get(state)
        if mask is None:
            ok = [i for i, b in enumerate(self.token_bytes)
                  if b and i not in self.json_banned and feed(state, b) is not None]
            mask = self.only(ok)
            if len(self._masks) < 4096:                 # states are few in practice; never grow without bound
                self._masks[state] = mask
        return mask


class Constraint(Protocol):
    def mask(self, output_ids: list[int]) -> torch.Tensor | None:
        """Allowed next tokens (bool [vocab]) given the tokens generated so far; None = anything goes."""


@dataclass
class BannedTokens:
    """Never these tokens (tool_choice "none": the call tag)."""

    table: TokenTable
    banned: tuple[int, ...]
    _mask: torch.Tensor | None = None

    def mask(self, output_ids: list[int]) -> torch.Tensor | None:
        if self._mask is None:
            self._mask = ~self.table.only(self.banned)
        return self._mask


@dataclass
class JsonConstraint:
    """Optionally one of several forced token sequences (`starts`: a tool-call header per offered tool), then one
    well-formed JSON object from `state`, then the `tail` tokens (the closing tag), then end of turn.

    State advances with the generated ids the sampler passes in, so the object lives with its request (preemption
    keeps the ids, hence stays consistent) and needs no callback from the engine.
    """

    table: TokenTable
    state: State | None  # None once the output left JSON (cannot happen under the mask): constraining stops
    starts: tuple[tuple[int, ...], ...] = ()
    tail: tuple[int, ...] = ()
    _seen: int = 0
    _json_from: int | None = None
    _json_end: int | None = None
    _history: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.starts:
            self._json_from = 0

    def _advance(self, tid: int) -> None:
        n = len(self._history)
        self._history.append(tid)
        if self._json_from is None:
            if any(len(s) == n + 1 and list(s) == self._history for s in self.starts):
                self._json_from = n + 1
        elif self._json_end is None:
            b = self.table.token_bytes[tid] if tid < self.table.size else None
            self.state = feed(self.state, b or b"") if b else None
            if self.state is not None and self.state[1] == DONE:
                self._json_end = n + 1
            elif self.state is None:                    # cannot happen under the mask; give up constraining
                self._json_end = -1

    def mask(self, output_ids: list[int]) -> torch.Tensor | None:
        for tid in output_ids[self._seen:]:
            self._advance(tid)
        self._seen = len(output_ids)
        n = len(self._history)
        if self._json_from is None:
            nxt = {s[n] for s in self.starts if len(s) > n and list(s[:n]) == self._history}
            return self.table.only(nxt) if nxt else None
        if self._json_end is None:
            if self.state is None:  # cannot happen: _advance sets _json_end when the state is lost
                return None
            mask = self.table.json_mask(self.state)
            return mask if bool(mask.any()) else self.table.only(self.table.eos_ids)
        if self._json_end < 0:
            return None
        done_tail = n - self._json_end
        if done_tail < len(self.tail):
            return self.table.only([self.tail[done_tail]])
        return self.table.only(self.table.eos_ids)
