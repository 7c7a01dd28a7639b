"""Request bodies of the OpenAI-compatible API, validated strictly from the raw JSON.

Validation errors become OpenAI-style 400s naming the offending field (`param` = dotted path), never a 500. Every
top-level field is implemented, accepted as metadata that cannot change a reply (:data:`METADATA_FIELDS`), or refused:
a known field this server does not implement gets a 400 naming it and saying why (:data:`REFUSED_FIELDS`), an unknown
one OpenAI's "Unrecognized request argument" 400 (nothing that would change generation is silently ignored). Nested
objects (messages, tools) keep extra keys, which go to the chat template as they are; message content parts must be
text (an image or an unknown part is a 400, never dropped).
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


class RefusedField(FieldError):
    """A field OpenAI (or a common server) defines that this server does not implement: 400 naming it and why."""


#: fields other servers define whose effect this server does not implement; each is a 400 saying why, never ignored
REFUSED_FIELDS: dict[str, str] = {
    "reasoning_effort": "the served model has no reasoning mode to set an effort for",
    "verbosity": "the served model has no verbosity control",
    "functions": "the legacy functions API is not implemented; send 'tools'",
    "function_call": "the legacy functions API is not implemented; send 'tool_choice'",
    "modalities": "the served model reads and writes text only",
    "audio": "the served model reads and writes text only",
    "prediction": "predicted outputs (speculative decoding) are not implemented",
    "web_search_options": "this server has no web search",
    "best_of": "only one completion per request is generated",
    "use_beam_search": "beam search is not implemented",
    "guided_json": "vLLM's guided decoding is not implemented; 'response_format' json_object is",
    "guided_regex": "vLLM's guided decoding is not implemented",
    "guided_choice": "vLLM's guided decoding is not implemented",
    "guided_grammar": "vLLM's guided decoding is not implemented",
}
#: fields accepted that change nothing in the reply (bookkeeping for the caller or a gateway); never logged
METADATA_FIELDS = ("user", "store", "metadata", "service_tier", "provider")
#: content part types OpenAI defines that carry something other than text (a text-only model cannot read them)
NON_TEXT_PARTS = frozenset({"image_url", "input_image", "input_audio", "audio", "file", "video_url", "image"})


def _refuse_unimplemented(data: Any) -> Any:
    """Before field validation: a known-but-unimplemented field gets its own reason, not "unrecognized"."""
    if isinstance(data, dict):
        for name, why in REFUSED_FIELDS.items():
            if name in data:
                raise RefusedField(name, why)
    return data


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
        for j, part in enumerate(self.content if isinstance(self.content, list) else ()):
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                continue
            if kind == "text":
                raise FieldError(f"content.{j}.text", "a text part needs 'text' as a string")
            why = ("the served model reads text only" if kind in NON_TEXT_PARTS else
                   "unknown content part type; only 'text' parts are read")
            raise FieldError(f"content.{j}.type", f"content part type {str(kind)[:40]!r} is not supported: {why}")
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
    ignore_eos: bool = False                 # vLLM extension: generate exactly max_tokens (benchmarks)
    # OpenAI: token id (a decimal string) -> bias added to its logit before sampling, -100..100 (+-100: forced/banned)
    logit_bias: dict[str, float] | None = None
    # vLLM extensions, vLLM's semantics: keep the k most likely tokens (-1 or 0: all); drop tokens whose probability
    # is below min_p x the top token's; divide positive / multiply negative logits of every token already in the
    # prompt or the output by repetition_penalty (1: off)
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0, le=100.0)
    # metadata (METADATA_FIELDS): accepted, change nothing in the reply, never logged
    user: str | None = None                  # OpenAI's end-user id
    store: bool | None = None                # OpenAI: keep the completion for its dashboard (nothing is kept here)
    metadata: dict[str, str] | None = None   # OpenAI: tags stored with the completion
    service_tier: str | None = None          # OpenAI: the processing tier (one tier here)
    provider: dict[str, Any] | None = None   # OpenRouter: provider routing preferences (one provider here)

    _refused = model_validator(mode="before")(_refuse_unimplemented)

    @model_validator(mode="after")
    def _stop_limits(self) -> _Sampling:
        if isinstance(self.stop, list) and (len(self.stop) > 4 or any(not s for s in self.stop)):
            raise FieldError("stop", "'stop' takes at most 4 non-empty strings")
        for key, bias in (self.logit_bias or {}).items():
            if not re.fullmatch(r"[0-9]{1,9}", key):
                raise FieldError("logit_bias", f"key {key[:20]!r} is not a token id (a non-negative integer)")
            if not -100.0 <= bias <= 100.0:
                raise FieldError(f"logit_bias.{key}", f"bias {bias} is outside [-100, 100]")
        return self

    def sampling_kwargs(self) -> dict[str, Any]:
        """The request's sampling settings as ``SamplingParams`` keywords, each at its no-op value when unset (the
        sampler skips what is at its no-op value, so a request without them costs what it did before)."""
        return {"temperature": 1.0 if self.temperature is None else self.temperature,
                "top_p": 1.0 if self.top_p is None else self.top_p, "seed": self.seed, "ignore_eos": self.ignore_eos,
                "presence_penalty": self.presence_penalty or 0.0, "frequency_penalty": self.frequency_penalty or 0.0,
                "logit_bias": {int(k): float(v) for k, v in self.logit_bias.items()} if self.logit_bias else None,
                "top_k": max(self.top_k or 0, 0), "min_p": self.min_p or 0.0,
                "repetition_penalty": 1.0 if self.repetition_penalty is None else self.repetition_penalty}

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
    # teacher-forced DECODE (reference_engine.forced): these tokens follow the prompt, one decode step each; the rows
    # returned are the distributions predicting them (the prompt's own rows are not returned, so no 'start')
    forced_token_ids: list[int] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_prompt(self) -> DistributionRequest:
        if (self.prompt is None) == (self.prompt_token_ids is None):
            raise FieldError("prompt", "give exactly one of 'prompt' and 'prompt_token_ids'")
        if self.forced_token_ids is not None and "start" in self.model_fields_set:
            raise FieldError("start", "'start' does not apply with 'forced_token_ids' (rows are the forced tokens')")
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
    if isinstance(cause, RefusedField):
        where = ".".join(loc + [cause.param])
        return f"Unsupported request argument '{where}': {cause}", where
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
