"""Request bodies of the OpenAI-compatible API, validated strictly from the raw JSON.

Validation errors become OpenAI-style 400s naming the offending field (`param` = dotted path), never a 500. Every
top-level field is either implemented or refused: an unknown one gets OpenAI's "Unrecognized request argument" 400
(nothing is accepted and silently ignored). Nested objects (messages, tools) keep extra keys, which go to the chat
template as they are.
"""

from __future__ import annotations

import keyword
import re
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class FieldError(ValueError):
    """A cross-field rule failed; carries the field to name in the 400 (pydantic keeps it in ctx['error'])."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Body(BaseModel):
    """A whole request body: unknown fields are refused (400), not ignored."""

    model_config = ConfigDict(extra="forbid", strict=True)


#: OpenAI's rule for function names
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
INT64 = 2 ** 63
#: names the chat template gets from the server itself; chat_template_kwargs may not replace them
RESERVED_TEMPLATE_KWARGS = frozenset({"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})


class FunctionCall(_Model):
    name: str
    arguments: str | dict = ""


class ToolCallIn(_Model):
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Model):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None

    @model_validator(mode="after")
    def _content_needed(self) -> ChatMessage:
        if self.role in ("user", "system", "developer", "tool") and self.content is None:
            raise FieldError("content", f"a '{self.role}' message needs 'content'")
        if self.role == "function" and (self.content is None or not self.name):
            raise FieldError("name", "a 'function' message (OpenAI's legacy tool result) needs 'name' and 'content'")
        return self


class FunctionDef(_Model):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDef(_Model):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_Body):
    name: str


class NamedToolChoice(_Body):
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(_Body):
    include_usage: bool = False


class _Sampling(_Body):
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = Field(default=None, ge=-INT64, lt=INT64)
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    stop: str | list[str] | None = None
    n: int | None = Field(default=None, ge=1, le=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None                  # OpenAI's end-user id: informational, as at OpenAI (never logged)
    ignore_eos: bool = False                 # vLLM extension: generate exactly max_tokens (benchmarks)

    @model_validator(mode="after")
    def _stop_limits(self) -> _Sampling:
        if isinstance(self.stop, list) and (len(self.stop) > 4 or any(not s for s in self.stop)):
            raise FieldError("stop", "'stop' takes at most 4 non-empty strings")
        return self

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolDef] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    chat_template_kwargs: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _consistency(self) -> ChatCompletionRequest:
        if self.top_logprobs and not self.logprobs:
            raise FieldError("top_logprobs", "'top_logprobs' requires 'logprobs': true")
        tools = self.tools or []
        names = [t.function.name for t in tools]
        for i, name in enumerate(names):
            if not TOOL_NAME.match(name):
                raise FieldError(f"tools.{i}.function.name",
                                 f"tool name {name[:80]!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
            if tools[i].function.strict:
                raise FieldError(f"tools.{i}.function.strict", "strict: true (arguments guaranteed to match the "
                                 "schema) is not supported by this server; arguments are only kept well-formed JSON")
        for key in self.chat_template_kwargs or {}:
            if not key.isidentifier() or keyword.iskeyword(key) or key in RESERVED_TEMPLATE_KWARGS:
                raise FieldError("chat_template_kwargs",
                                 f"key {key[:80]!r} cannot be passed to the chat template (not a name, or one the "
                                 f"server sets: {', '.join(sorted(RESERVED_TEMPLATE_KWARGS))})")
        if self.response_format is not None:
            kind = self.response_format.get("type")
            if kind == "json_schema":
                raise FieldError("response_format.type", "'json_schema' is not supported by this server; "
                                 "'json_object' and 'text' are")
            if kind not in ("text", "json_object") or set(self.response_format) != {"type"}:
                raise FieldError("response_format", "must be {\"type\": \"text\"} or {\"type\": \"json_object\"}")
            if self.json_object and (self.tool_choice == "required" or isinstance(self.tool_choice, NamedToolChoice)):
                raise FieldError("response_format", "'json_object' cannot be combined with a forced tool call "
                                 "(tool_choice 'required' or a named function)")
        if isinstance(self.tool_choice, NamedToolChoice) and self.tool_choice.function.name not in names:
            raise FieldError("tool_choice",
                             f"tool_choice names function {self.tool_choice.function.name!r}, which is not in 'tools'")
        if self.tool_choice == "required" and not names:
            raise FieldError("tool_choice", "tool_choice 'required' needs a non-empty 'tools'")
        return self

    @property
    def json_object(self) -> bool:
        return self.response_format is not None and self.response_format.get("type") == "json_object"


class CompletionRequest(_Sampling):
    prompt: str | list[int] | list[str] | list[list[int]]
    max_tokens: int | None = Field(default=None, ge=0)
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=20)

    @model_validator(mode="after")
    def _single_prompt(self) -> CompletionRequest:
        p = self.prompt
        if isinstance(p, list) and p and isinstance(p[0], (str, list)):
            if len(p) != 1:
                raise FieldError("prompt", "only one prompt per request is supported (n=1)")
        if isinstance(p, list) and not p:
            raise FieldError("prompt", "'prompt' is empty")
        return self

    def single_prompt(self) -> str | list[int]:
        p = self.prompt
        if isinstance(p, str):
            return p
        first = p[0] if p else None
        if isinstance(first, (str, list)):  # a list of prompts: its first
            return first
        return cast(list[int], p)  # token ids (its first element is neither text nor a list)


class DistributionRequest(_Body):
    model: str | None = None
    prompt: str | None = None
    prompt_token_ids: list[int] | None = None
    start: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _one_prompt(self) -> DistributionRequest:
        if (self.prompt is None) == (self.prompt_token_ids is None):
            raise FieldError("prompt", "give exactly one of 'prompt' and 'prompt_token_ids'")
        return self


def _is_union_tag(part: str) -> bool:
    """pydantic puts union-member names (str, list[int], function-after[...], NamedToolChoice) in error locations;
    they are not fields, so the 400's `param` leaves them out."""
    return part in {"str", "int", "float", "bool", "dict", "list", "none"} or "[" in part or part[:1].isupper()


def first_error(err: ValidationError) -> tuple[str, str | None]:
    """(message, param) for the first problem, in OpenAI's style."""
    e = err.errors(include_url=False)[0]
    loc = [str(x) for x in e.get("loc", ()) if not _is_union_tag(str(x))]
    param = ".".join(loc) or None
    msg = e.get("msg", "invalid value")
    cause = e.get("ctx", {}).get("error")
    if isinstance(cause, FieldError):
        where = ".".join(loc + [cause.param])
        return f"Invalid value for '{where}': {cause}", where
    if e.get("type") == "extra_forbidden":
        return f"Unrecognized request argument supplied: {param}", param
    if e.get("type") == "json_invalid":
        return f"The request body is not valid JSON: {e.get('ctx', {}).get('error', msg)}", None
    if param:
        return f"Invalid value for '{param}': {msg}", param
    return f"Invalid request: {msg}", None
