"""Tool-call parsers: model text -> (content, tool calls). One class per wire format, picked by name.

Hermes/Qwen format: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks inside the assistant text.
A block whose JSON does not parse is kept as text (the verifier scores malformed calls; we must not hide them).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Protocol


@dataclass
class ParsedToolCall:
    name: str
    arguments: str          # JSON text, as OpenAI sends it
    id: str
    complete: bool = True   # False: a forced call cut (max_tokens, stop) before its arguments closed

    def to_openai(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def new_call_id() -> str:
    return "call_" + secrets.token_hex(12)


class ToolParser(Protocol):
    start_tag: str
    end_tag: str

    def parse(self, text: str) -> tuple[str | None, list[ParsedToolCall]]: ...

    def parse_forced(self, text: str) -> tuple[str | None, list[ParsedToolCall]]: ...


class HermesToolParser:
    start_tag = "<tool_call>"
    end_tag = "</tool_call>"
    _forced = re.compile(r'<tool_call>\{"name": "([a-zA-Z0-9_-]{1,64})", "arguments":(.*)', re.DOTALL)

    def parse_forced(self, text: str) -> tuple[str | None, list[ParsedToolCall]]:
        """A reply that had to be a call (tool_choice "required" or named): as `parse`, and if the call was cut
        before its JSON closed (max_tokens), the call with its arguments as far as they came (`complete` False),
        as OpenAI returns a truncated forced call, rather than the markup as content."""
        content, calls = self.parse(text)
        if calls:
            return content, calls
        m = self._forced.match(text.lstrip())
        if m is None:
            return content, calls
        args = m.group(2).split(self.end_tag)[0].strip()
        return None, [ParsedToolCall(m.group(1), args, new_call_id(), complete=False)]

    def parse(self, text: str) -> tuple[str | None, list[ParsedToolCall]]:
        calls: list[ParsedToolCall] = []
        kept: list[str] = []
        pos = 0
        while True:
            i = text.find(self.start_tag, pos)
            if i < 0:
                kept.append(text[pos:])
                break
            kept.append(text[pos:i])
            j = text.find(self.end_tag, i)
            body = text[i + len(self.start_tag): j if j >= 0 else len(text)]
            call = self._parse_one(body)
            if call is None:
                kept.append(text[i: j + len(self.end_tag) if j >= 0 else len(text)])
            else:
                calls.append(call)
            if j < 0:
                break
            pos = j + len(self.end_tag)
        content = "".join(kept)
        if calls:                      # whitespace between text and calls is formatting, not content
            content = content.strip()
        return (content or None), calls

    @staticmethod
    def _parse_one(body: str) -> ParsedToolCall | None:
        try:
            obj = json.loads(body.strip())
        except json.JSONDecodeError:
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None
        args = obj.get("arguments", obj.get("parameters", {}))
        args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        return ParsedToolCall(obj["name"], args_text, new_call_id())


class StreamingToolSplitter:
    """For streams: emits plain text as it comes, but holds back anything from a `<tool_call>` tag on, since a call
    can only be sent once it is complete. At the end, `finish()` parses the held text."""

    def __init__(self, parser: ToolParser) -> None:
        self.parser = parser
        self.buffer = ""
        self.in_calls = False

    def push(self, delta: str) -> str:
        if self.in_calls:
            self.buffer += delta
            return ""
        text = self.buffer + delta
        i = text.find(self.parser.start_tag)
        if i >= 0:
            self.in_calls = True
            self.buffer = text[i:]
            return text[:i]
        # keep a suffix that could be the start of the tag
        keep = 0
        for n in range(min(len(self.parser.start_tag) - 1, len(text)), 0, -1):
            if self.parser.start_tag.startswith(text[-n:]):
                keep = n
                break
        self.buffer = text[len(text) - keep:] if keep else ""
        return text[: len(text) - keep]

    def finish(self, forced: bool = False) -> tuple[str, list[ParsedToolCall]]:
        """(remaining text to send, parsed calls); `forced`: the reply had to be a call (see parse_forced)."""
        if not self.in_calls:
            rest, self.buffer = self.buffer, ""
            return rest, []
        content, calls = (self.parser.parse_forced if forced else self.parser.parse)(self.buffer)
        self.buffer = ""
        return (content or ""), calls


PARSERS: dict[str, type] = {"hermes": HermesToolParser}


def get_parser(name: str = "hermes") -> ToolParser:
    try:
        return PARSERS[name]()
    except KeyError:
        raise ValueError(f"unknown tool parser {name!r} (known: {', '.join(PARSERS)})") from None
