"""Render a checkpoint's jinja2 chat template the way transformers does.

Same environment choices as HF's `apply_chat_template`: sandboxed, trim_blocks + lstrip_blocks, the loopcontrols
extension, a `tojson` that keeps non-ASCII text and accepts `indent`, and a `raise_exception` global. OpenAI request
messages are normalised first (list-of-parts content -> text, tool-call arguments JSON string -> object, because
templates index into `tool_call.function.arguments` as a mapping; `developer` -> `system`; legacy `function` results
-> `tool` messages that keep their `name`).
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from typing import Any

from jinja2 import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateError(ValueError):
    """The template raised (raise_exception) or failed to render; the message is what the template said."""


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators=None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@lru_cache(maxsize=8)
def _compile(source: str):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)


def _content_text(content: Any) -> Any:
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return content


def normalise_messages(messages: list[dict]) -> list[dict]:
    out = []
    for m in messages:
        m = dict(m)
        if m.get("role") == "developer":   # OpenAI's newer name for the system role; templates know only "system"
            m["role"] = "system"
        elif m.get("role") == "function":  # OpenAI's legacy tool result: a tool message that keeps its `name`
            m["role"] = "tool"
        m["content"] = _content_text(m.get("content"))
        if m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                tc = json.loads(json.dumps(tc))
                fn = tc.get("function") or {}
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        fn["arguments"] = json.loads(args) if args.strip() else {}
                    except json.JSONDecodeError:
                        pass                     # leave the string; the template prints it as is
                tc["function"] = fn
                calls.append(tc)
            m["tool_calls"] = calls
        out.append(m)
    return out


def render_chat(
    template: str,
    messages: list[dict],
    *,
    tools: list[dict] | None = None,
    add_generation_prompt: bool = True,
    bos_token: str | None = None,
    eos_token: str | None = None,
    **kwargs: Any,
) -> str:
    try:
        return _compile(template).render(
            messages=normalise_messages(messages),
            tools=tools or None,
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token or "",
            eos_token=eos_token or "",
            **kwargs,
        )
    except ChatTemplateError:
        raise
    except TemplateError as e:
        raise ChatTemplateError(f"chat template failed: {e}") from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
        # e.g. a chat_template_kwargs value of a type the template does not expect: the request's fault, not ours
        raise ChatTemplateError(f"chat template failed: {type(e).__name__}: {e}") from None
