"""Chat format of verifier-tiny: special tokens and the jinja2 chat template.

The template is the single source of truth for how a conversation becomes text: training renders
its corpus with it, and it ships in ``tokenizer_config.json`` so the engine (and ``transformers``)
render requests identically. Tools are rendered as compact one-line signatures rather than full JSON
Schemas because the model is tiny and trains on a few million tokens: short, regular prompts are
what make it learn.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

BOS = None  # no BOS token: ChatML-style turns delimit everything
PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"  # end of turn; also the EOS the engine stops on
TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"

#: Control tokens: never shown in decoded text.
SPECIAL_TOKENS = [PAD_TOKEN, IM_START, IM_END]
#: Markers that must survive decoding (the engine's tool-call parser looks for them in the text).
MARKER_TOKENS = [TOOL_CALL_OPEN, TOOL_CALL_CLOSE, TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE]

#: Where the offered tools are rendered (``training.train --tool-list-at``). ``system``: in the system turn, before
#: the conversation, as most chat templates do. ``first-user``: after the first user message's text, in that turn
#: (Llama 3.1's template can put them in the first user message, Mistral's next to the request). Why the second: a
#: causal model reads the tool list *after* the request there, so each tool's tokens can already be compared with
#: the request, and deciding whether any offered tool fits no longer rests on the first answer token alone. It
#: stays at the first user message, not the last, so a conversation's rendered prefix never changes as it grows
#: (prompt caching, shared-prefix training groups).
TOOL_LIST_PLACES = ("system", "first-user")

_MACROS = (
    "{% macro text(c) %}"
    "{% if c is string %}{{ c }}"
    "{% elif c %}{% for p in c %}{% if p.text is defined %}{{ p.text }}{% endif %}{% endfor %}"
    "{% endif %}"
    "{% endmacro %}"
    "{% macro ptype(v) %}"
    "{% if v.enum is defined %}{{ v.enum | join('|') }}"
    "{% elif v.type is defined and v.type == 'object' and v.properties is defined %}{{ '{' }}{{ props(v) }}{{ '}' }}"
    "{% elif v.type is defined and v.type == 'array' and v['items'] is defined %}{{ ptype(v['items']) }}[]"
    "{% elif v.type is defined and v.type is string %}{{ v.type }}"
    "{% elif v.type is defined %}{{ v.type | join('|') }}"
    "{% else %}any{% endif %}"
    "{% endmacro %}"
    "{% macro props(o) %}"
    "{% set req = o.required if o.required is defined else [] %}"
    "{% for k, v in o.properties.items() %}"
    "{{ k }}{{ '' if k in req else '?' }}:{{ ptype(v) }}{{ ', ' if not loop.last else '' }}"
    "{% endfor %}"
    "{% endmacro %}"
)
#: the offered tools, one compact signature per line
_TOOL_LIST = (
    "Tools:\n"
    "{% for t in tools %}"
    "{% set f = t.function if t.function is defined else t %}"
    "{{ f.name }}("
    "{% if f.parameters is defined and f.parameters.properties is defined %}{{ props(f.parameters) }}{% endif %}"
    ")"
    "{{ '\\n' }}"
    "{% endfor %}"
)


def _message_turns(first_user_turn: str = "") -> str:
    """Every message after the system one; ``first_user_turn`` is an ``elif`` branch rendering the first user
    message its own way (empty: like any other message)."""
    return (
        "{% for m in messages[ns.start:] %}"
        "{% if m.role == 'tool' %}"
        "<|im_start|>tool\n<tool_response>{{ text(m.content) }}</tool_response><|im_end|>\n"
        "{% elif m.role == 'assistant' %}"
        "<|im_start|>assistant\n{{ text(m.content) }}"
        "{% if m.tool_calls is defined and m.tool_calls %}"
        "{% for tc in m.tool_calls %}"
        "{% set fn = tc.function if tc.function is defined else tc %}"
        "<tool_call>{\"name\": \"{{ fn.name }}\", \"arguments\": "
        "{% if fn.arguments is string %}{{ fn.arguments }}{% else %}{{ fn.arguments | tojson }}{% endif %}"
        "{{ '}' }}</tool_call>"
        "{% endfor %}"
        "{% endif %}"
        "<|im_end|>\n"
        + first_user_turn +
        "{% else %}"
        "<|im_start|>{{ m.role }}\n{{ text(m.content) }}<|im_end|>\n"
        "{% endif %}"
        "{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


#: ``system`` (the shipped checkpoint's template): the system turn holds the system prompt and the tools
CHAT_TEMPLATE = _MACROS + (
    "{% set ns = namespace(start=0) %}"
    "{% if messages and messages[0].role == 'system' %}{% set ns.start = 1 %}{% endif %}"
    "{% if tools or ns.start == 1 %}"
    "<|im_start|>system\n"
    "{% if ns.start == 1 %}{{ text(messages[0].content) }}{{ '\\n' }}{% endif %}"
    "{% if tools %}" + _TOOL_LIST + "{% endif %}"
    "<|im_end|>\n"
    "{% endif %}"
) + _message_turns()

#: ``first-user``: the system turn holds the system prompt only (and the tools when no user message follows)
FIRST_USER_CHAT_TEMPLATE = _MACROS + (
    "{% set ns = namespace(start=0, first_user=-1) %}"
    "{% if messages and messages[0].role == 'system' %}{% set ns.start = 1 %}{% endif %}"
    "{% for m in messages %}{% if m.role == 'user' and ns.first_user < 0 %}{% set ns.first_user = loop.index0 %}"
    "{% endif %}{% endfor %}"
    "{% set tools_in_system = tools and ns.first_user < 0 %}"
    "{% if tools_in_system or ns.start == 1 %}"
    "<|im_start|>system\n"
    "{% if ns.start == 1 %}{{ text(messages[0].content) }}{{ '\\n' }}{% endif %}"
    "{% if tools_in_system %}" + _TOOL_LIST + "{% endif %}"
    "<|im_end|>\n"
    "{% endif %}"
) + _message_turns(
    "{% elif tools and loop.index0 + ns.start == ns.first_user %}"
    "<|im_start|>user\n{{ text(m.content) }}{{ '\\n' }}" + _TOOL_LIST + "<|im_end|>\n"
)


def chat_template(tool_list_at: str = "system") -> str:
    """The chat template that renders the offered tools at ``tool_list_at`` (one of :data:`TOOL_LIST_PLACES`)."""
    if tool_list_at == "system":
        return CHAT_TEMPLATE
    if tool_list_at == "first-user":
        return FIRST_USER_CHAT_TEMPLATE
    raise ValueError(f"tool list place must be one of {TOOL_LIST_PLACES}, not {tool_list_at!r}")


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators=None,
            sort_keys: bool = False) -> str:
    """HF's ``tojson``: plain json.dumps (jinja2's built-in one HTML-escapes and sorts keys)."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


# the same environment HF's apply_chat_template (and the reference engine) use
_ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
_ENV.filters["tojson"] = _tojson
_COMPILED = {template: _ENV.from_string(template) for template in (CHAT_TEMPLATE, FIRST_USER_CHAT_TEMPLATE)}

#: An assistant turn's supervised span: everything after the header, up to and including <|im_end|>.
_ASSISTANT_SPAN = re.compile(re.escape(IM_START) + r"assistant\n(.*?" + re.escape(IM_END) + ")", re.S)


def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
           add_generation_prompt: bool = False, template: str = CHAT_TEMPLATE) -> str:
    """Render a conversation exactly as ``template`` (one of this module's; default the ``system`` one) does."""
    return _COMPILED[template].render(messages=messages, tools=tools or None,
                                      add_generation_prompt=add_generation_prompt)


def assistant_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of assistant outputs (the only tokens the training loss is computed on)."""
    return [(m.start(1), m.end(1)) for m in _ASSISTANT_SPAN.finditer(text)]


#: A tool-call block as the template renders it: the name, then the arguments' JSON object.
_CALL_BLOCK = re.compile(re.escape(TOOL_CALL_OPEN) + r'\{"name": ("[^"]*"), "arguments": (.*?)\}'
                         + re.escape(TOOL_CALL_CLOSE), re.S)
#: A JSON string followed by a colon: an object key (matched left to right, so a value's quotes never start one).
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"(\s*:)?')


def call_name_and_key_spans(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Character spans, quotes included, of each tool call's name, and of every key in its arguments (nested ones
    too): two disjoint lists, each in text order, from one pass over the text.

    These are the tokens a call's schema validity rests on (a name from the offered list; the parameter names of
    that tool); the values come from the request. ``training.train --schema-weight`` weighs them.
    """
    names: list[tuple[int, int]] = []
    keys: list[tuple[int, int]] = []
    for block in _CALL_BLOCK.finditer(text):
        names.append(block.span(1))
        start = block.start(2)
        keys += [(start + m.start(), start + m.end() - len(m.group(1))) for m in _JSON_STRING.finditer(block.group(2))
                 if m.group(1)]
    return names, keys


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """The assistant's tool-call block as the model must emit it (json.dumps default separators)."""
    return f'{TOOL_CALL_OPEN}{json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)}{TOOL_CALL_CLOSE}'


def assistant_tool_message(name: str, arguments: dict[str, Any], call_id: str = "call_0") -> dict[str, Any]:
    """An OpenAI-shape assistant message carrying one tool call (arguments as a JSON string)."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}]}
