"""The tool catalogue (loaded from data) and the seeded generation of tool-call cases from it.

Why one catalogue for both evaluation and training: the shipped tiny model is trained on cases generated
from these same tools, so its quality bar can be measured on cases it has never seen *phrased*. The
catalogue is data: ``tools.json`` (each tool's OpenAI definition, and which domains are close), and
``eval_phrasings.json`` (how a user asks for each tool in the built-in suites). How arguments are drawn
and spoken is code, in ``samplers.py``. The training phrasings are a second :class:`Phrasings` file kept
with the training code (``training/train_phrasings.json``), since only training reads them; passing
them here gives training cases with the same draws as evaluation cases.

Every phrasing states every argument value the expected call carries, so the expected call is
recoverable from the text alone. Schemas deliberately cover JSON Schema features providers get wrong
(nested objects, arrays with bounds, enums, numeric bounds, optional fields, patterns, formats).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from suites.toolcall.samplers import RENDERERS, SAMPLERS, Renderer, Sampler, join_words

HERE = Path(__file__).resolve().parent
TOOLS_FILE = HERE / "tools.json"
EVAL_PHRASINGS_FILE = HERE / "eval_phrasings.json"

# --------------------------------------------------------------------------- the data files' shapes


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolDefinition(_Frozen):
    """One entry of ``tools.json``: what an endpoint is offered (the OpenAI function) and its domain."""

    name: str = Field(pattern=r"^[A-Za-z0-9_]+$")
    domain: str
    description: str
    parameters: dict[str, Any]


class ToolsFile(_Frozen):
    """``tools.json``: the tools, in catalogue order, and the groups of domains a request could blur."""

    domain_groups: dict[str, str]
    tools: tuple[ToolDefinition, ...]


class ToolPhrasing(_Frozen):
    """How a user asks for one tool: ``{arg}`` templates stating every required argument, and per
    optional argument the clauses that add it when a sample carries it."""

    templates: tuple[str, ...] = Field(min_length=1)
    clauses: dict[str, tuple[str, ...]] = {}


class Phrasings(_Frozen):
    """One set of wordings for requests (evaluation or training); the two sets never share a string.

    ``name`` seeds the case generator and tags every case, so the same seed gives different cases for
    different phrasings."""

    name: str = Field(pattern=r"^[a-z]+$")
    tools: dict[str, ToolPhrasing]
    wrappers: tuple[str, ...] = Field(min_length=1)
    no_tool_requests: tuple[str, ...] = Field(min_length=1)
    system_prompts: tuple[str, ...] = Field(min_length=1)
    acks: tuple[str, ...] = Field(min_length=1)


def _read_model(path: Path, model: type[BaseModel]) -> Any:
    """``model`` parsed from the JSON file at ``path``; a one-line error naming the file and field."""
    try:
        return model.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: line {e.lineno}: not JSON: {e.msg}") from None
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ValueError(f"{path}: {where}: {err['msg']}") from None


# --------------------------------------------------------------------------- the tool type


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its OpenAI function definition plus how to sample arguments and say them in words."""

    name: str
    domain: str
    description: str
    parameters: dict[str, Any]
    sampler: Sampler
    render: dict[str, Renderer] = field(default_factory=dict)

    def openai_tool(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    def sample(self, rng: random.Random) -> dict[str, Any]:
        return self.sampler(rng)

    def _text(self, arg: str, value: Any) -> str:
        fn = self.render.get(arg)
        if fn is not None:
            return fn(value)
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        if isinstance(value, list):
            return join_words([str(v) for v in value])
        return str(value)

    def phrase(self, args: dict[str, Any], rng: random.Random, phrasings: Phrasings) -> str:
        """A natural request that states exactly ``args``, worded from ``phrasings``."""
        wording = phrasings.tools[self.name]
        template = rng.choice(wording.templates).rstrip()
        end = template[-1] if template[-1] in ".?!" else "."
        core = template[:-1] if template[-1] in ".?!" else template
        values = {k: self._text(k, v) for k, v in args.items()}
        text = core.format(**values)
        for arg, clauses in wording.clauses.items():
            if arg in args:
                text += rng.choice(clauses).format(**values)
        return _finish(text, end)


def _finish(text: str, end: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    if not text.endswith(("?", ".", "!")):
        text += end
    return text[0].upper() + text[1:]


def load_tools(path: Path = TOOLS_FILE) -> tuple[list[ToolSpec], dict[str, str]]:
    """The catalogue's tools (definitions joined with their samplers and renderers) and domain groups."""
    data: ToolsFile = _read_model(path, ToolsFile)
    names = [t.name for t in data.tools]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: tools: duplicate name {sorted(n for n in names if names.count(n) > 1)[0]!r}")
    if set(names) != set(SAMPLERS) or not set(RENDERERS) <= set(names):
        odd = sorted(set(names) ^ set(SAMPLERS) | set(RENDERERS) - set(names))
        raise ValueError(f"{path}: tools and suites/toolcall/samplers.py disagree on {odd}")
    specs = [ToolSpec(t.name, t.domain, t.description, t.parameters, SAMPLERS[t.name], RENDERERS.get(t.name, {}))
             for t in data.tools]
    return specs, dict(data.domain_groups)


def load_phrasings(path: Path) -> Phrasings:
    """A :class:`Phrasings` file, checked to word every catalogue tool and only its optional arguments."""
    phrasings: Phrasings = _read_model(path, Phrasings)
    if set(phrasings.tools) != set(TOOLS_BY_NAME):
        odd = sorted(set(phrasings.tools) ^ set(TOOLS_BY_NAME))
        raise ValueError(f"{path}: tools: must word exactly the catalogue's tools; differs on {odd}")
    for name, wording in phrasings.tools.items():
        props = TOOLS_BY_NAME[name].parameters.get("properties") or {}
        for arg in wording.clauses:
            if arg not in props:
                raise ValueError(f"{path}: tools.{name}.clauses.{arg}: not a parameter of {name}")
    return phrasings


TOOLS, DOMAIN_GROUPS = load_tools()
TOOLS_BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}
#: the wordings of the built-in suites (never used for training)
EVAL_PHRASINGS = load_phrasings(EVAL_PHRASINGS_FILE)

# --------------------------------------------------------------------------- case generation

#: How many tools a request offers (1..6); weighted toward few so prompts stay short for a CPU model.
N_TOOLS_WEIGHTS = (30, 25, 18, 12, 8, 7)
DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0, "max_tokens": 256}


def _wrap(text: str, rng: random.Random, phrasings: Phrasings) -> str:
    return rng.choice(phrasings.wrappers).format(t=text)


def _request_text(spec: ToolSpec, args: dict[str, Any], rng: random.Random, phrasings: Phrasings) -> str:
    """A user request for ``spec`` stating ``args``, phrased and wrapped."""
    return _wrap(spec.phrase(args, rng, phrasings), rng, phrasings)


def _group(spec: ToolSpec) -> str:
    """A "no tool fits" case never offers tools from the requested tool's group (``DOMAIN_GROUPS``: domains
    close enough that one's tool might serve the other's request), so its expected answer is unambiguous."""
    return DOMAIN_GROUPS.get(spec.domain, spec.domain)


def _n_tools(rng: random.Random, max_tools: int) -> int:
    k = max(1, min(max_tools, len(N_TOOLS_WEIGHTS)))
    return rng.choices(range(1, k + 1), weights=N_TOOLS_WEIGHTS[:k])[0]


def _offer(rng: random.Random, must: ToolSpec | None, k: int, exclude_groups: set[str]) -> list[ToolSpec]:
    pool = [t for t in TOOLS if t is not must and _group(t) not in exclude_groups]
    chosen = rng.sample(pool, min(len(pool), k - (1 if must else 0)))
    if must is not None:
        chosen.append(must)
    rng.shuffle(chosen)
    return chosen


def _body(rng: random.Random, user_text: str, tools: list[ToolSpec], phrasings: Phrasings,
          tool_choice: Any = "auto") -> dict[str, Any]:
    return {
        "messages": [{"role": "system", "content": rng.choice(phrasings.system_prompts)},
                     {"role": "user", "content": user_text}],
        "tools": [t.openai_tool() for t in tools],
        "tool_choice": tool_choice,
        **DEFAULT_PARAMS,
    }


def make_tool_case(rng: random.Random, spec: ToolSpec, phrasings: Phrasings, max_tools: int = 6,
                   forced: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """A request that ``spec`` answers, with distractor tools; returns (body, meta-without-id)."""
    args = spec.sample(rng)
    text = _request_text(spec, args, rng, phrasings)
    tools = _offer(rng, spec, _n_tools(rng, max_tools), set())
    choice: Any = {"type": "function", "function": {"name": spec.name}} if forced else "auto"
    body = _body(rng, text, tools, phrasings, choice)
    tags = ["tool", f"tool:{spec.name}", f"domain:{spec.domain}", f"n_tools:{len(tools)}"]
    if forced:
        tags += ["forced"] + [f"feature:{f}" for f in schema_features(spec.parameters)]
    return body, {"tags": tags, "expected": {"tool": spec.name, "arguments": args}}


def make_no_tool_case(rng: random.Random, phrasings: Phrasings,
                      max_tools: int = 6) -> tuple[dict[str, Any], dict[str, Any]]:
    """A request no offered tool fits: small talk/knowledge, or a task for a tool that is *not* offered."""
    k = _n_tools(rng, max_tools)
    if rng.random() < 0.5:
        text = _wrap(rng.choice(phrasings.no_tool_requests), rng, phrasings)
        tools = _offer(rng, None, k, set())
        tags = ["no_tool", "no_tool:chat"]
    else:
        absent = rng.choice(TOOLS)
        text = _request_text(absent, absent.sample(rng), rng, phrasings)
        tools = _offer(rng, None, k, {_group(absent)})
        tags = ["no_tool", "no_tool:unavailable", f"absent:{absent.name}"]
    body = _body(rng, text, tools, phrasings)
    return body, {"tags": tags + [f"n_tools:{len(tools)}"], "expected": None}


def withhold_tool(body: dict[str, Any], tool_name: str, rng: random.Random) -> dict[str, Any] | None:
    """The same request with no offered tool from ``tool_name``'s domain group, so no offered tool fits it.

    Each offered tool of that group is replaced, in its place, by a tool of a group not offered, as
    :func:`make_no_tool_case` draws the tools for a request whose tool is not offered. Why: paired with the
    original (where the tool is offered and called), only the tool list tells calling from refusing, so a
    model trained on both must read the list instead of guessing from the request's wording. ``None`` when
    the body's history calls a tool of that group (it could not be withheld without rewriting the history).
    """
    group = _group(TOOLS_BY_NAME[tool_name])
    offered = [TOOLS_BY_NAME[t["function"]["name"]] for t in body["tools"]]
    called = {c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or []}
    if any(_group(TOOLS_BY_NAME[name]) == group for name in called if name in TOOLS_BY_NAME):
        return None
    taken = {_group(t) for t in offered} | {group}
    pool = [t for t in TOOLS if _group(t) not in taken]
    replacements = iter(rng.sample(pool, sum(_group(t) == group for t in offered)))
    tools = [next(replacements) if _group(t) == group else t for t in offered]
    return {**body, "tools": [t.openai_tool() for t in tools]}


def add_history(rng: random.Random, body: dict[str, Any], phrasings: Phrasings) -> str:
    """Prepend one finished exchange (user asks, assistant calls an offered tool, tool answers, assistant
    acknowledges) before the final user message, so replies must be right *after* tool-call history, the
    situation agents live in and where tool-call ids and tool results must survive a provider's template.
    Returns the name of the tool called in the history."""
    offered = [TOOLS_BY_NAME[t["function"]["name"]] for t in body["tools"]]
    prior = rng.choice(offered)
    args = prior.sample(rng)
    call_id = f"call_{rng.getrandbits(32):08x}"
    result = {"status": "ok", "id": f"{prior.name[:3]}-{rng.randint(1000, 9999)}"}
    history = [
        {"role": "user", "content": prior.phrase(args, rng, phrasings)},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": prior.name, "arguments": json.dumps(args)}}]},
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
        {"role": "assistant", "content": rng.choice(phrasings.acks)},
    ]
    body["messages"] = body["messages"][:1] + history + body["messages"][1:]
    return prior.name


def generate_cases(seed: int, n: int, phrasings: Phrasings = EVAL_PHRASINGS, *, no_tool_share: float = 0.3,
                   followup_share: float = 0.15, max_tools: int = 6,
                   id_prefix: str = "core") -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``n`` mixed cases (tool / no-tool) as ``(body, _meta)`` pairs, reproducible from ``seed``.

    Tools are visited round-robin in a seeded order so every tool appears about equally often. The
    no-tool share is exact (``round(n * no_tool_share)`` cases), placed at seeded positions; about
    ``followup_share`` of all cases carry one earlier tool-call exchange (:func:`add_history`).
    """
    rng = random.Random(f"{seed}:{phrasings.name}:{id_prefix}")
    n_none = round(n * no_tool_share)
    none_at = set(rng.sample(range(n), n_none))
    order: list[ToolSpec] = []
    out = []
    for i in range(n):
        if i in none_at:
            body, meta = make_no_tool_case(rng, phrasings, max_tools)
        else:
            if not order:
                order = list(TOOLS)
                rng.shuffle(order)
            body, meta = make_tool_case(rng, order.pop(), phrasings, max_tools)
        if rng.random() < followup_share:
            prior = add_history(rng, body, phrasings)
            meta["tags"] = meta["tags"] + ["followup", f"history:{prior}"]
        meta = {"id": f"{id_prefix}-{i:05d}", **meta, "tags": meta["tags"] + [phrasings.name]}
        out.append((body, meta))
    return out


def generate_case_groups(seed: int, n_groups: int, size: int, phrasings: Phrasings, *,
                         no_tool_share: float = 0.3, followup_share: float = 0.15, max_tools: int = 6,
                         id_prefix: str = "group") -> list[list[tuple[dict[str, Any], dict[str, Any]]]]:
    """``n_groups`` groups of ``size`` cases that differ only in the final user request.

    Why: a training step can then compute the shared system prompt, tool list and history once for
    several requests (``training.train``'s shared-prefix rows) instead of once per request. Each case on its
    own is drawn as :func:`generate_cases` draws one: the needed tool is among the offered ones, a request
    for a tool that is not offered names a tool from a domain group none of the offered tools belongs to,
    and about ``no_tool_share`` of the requests fit no offered tool.
    """
    rng = random.Random(f"{seed}:{phrasings.name}:{id_prefix}")
    groups = []
    for g in range(n_groups):
        offered = _offer(rng, None, _n_tools(rng, max_tools), set())
        system = rng.choice(phrasings.system_prompts)
        history_body = {"messages": [{"role": "system", "content": system}],
                        "tools": [t.openai_tool() for t in offered]}
        history_tags: list[str] = []
        if rng.random() < followup_share:
            history_tags = ["followup", f"history:{add_history(rng, history_body, phrasings)}"]
        offered_groups = {_group(t) for t in offered}
        absent_pool = [t for t in TOOLS if _group(t) not in offered_groups]
        group = []
        for b in range(size):
            if rng.random() < no_tool_share:
                if rng.random() < 0.5 or not absent_pool:
                    text = _wrap(rng.choice(phrasings.no_tool_requests), rng, phrasings)
                    tags, expected = ["no_tool", "no_tool:chat"], None
                else:
                    absent = rng.choice(absent_pool)
                    text = _request_text(absent, absent.sample(rng), rng, phrasings)
                    tags, expected = ["no_tool", "no_tool:unavailable", f"absent:{absent.name}"], None
            else:
                spec = rng.choice(offered)
                args = spec.sample(rng)
                text = _request_text(spec, args, rng, phrasings)
                tags = ["tool", f"tool:{spec.name}", f"domain:{spec.domain}"]
                expected = {"tool": spec.name, "arguments": args}
            body = {"messages": history_body["messages"] + [{"role": "user", "content": text}],
                    "tools": history_body["tools"], "tool_choice": "auto", **DEFAULT_PARAMS}
            meta = {"id": f"{id_prefix}-{g:05d}-{b}", "expected": expected,
                    "tags": tags + [f"n_tools:{len(offered)}"] + history_tags + [phrasings.name]}
            group.append((body, meta))
        groups.append(group)
    return groups


def generate_forced_cases(seed: int, per_tool: int = 3, phrasings: Phrasings = EVAL_PHRASINGS, *,
                          max_tools: int = 3, id_prefix: str = "schemas") -> list[tuple[dict[str, Any],
                                                                                        dict[str, Any]]]:
    """Forced calls (``tool_choice`` names the function) for every tool, tagged with its schema features."""
    rng = random.Random(f"{seed}:{phrasings.name}:{id_prefix}")
    out = []
    i = 0
    for spec in TOOLS:
        for _ in range(per_tool):
            body, meta = make_tool_case(rng, spec, phrasings, max_tools, forced=True)
            out.append((body, {"id": f"{id_prefix}-{i:05d}", **meta, "tags": meta["tags"] + [phrasings.name]}))
            i += 1
    return out


#: (schema keyword, feature name) pairs reported whenever the keyword appears
_KEYWORD_FEATURES = (("enum", "enum"), ("const", "const"), ("pattern", "pattern"), ("oneOf", "oneOf"),
                     ("anyOf", "anyOf"), ("$ref", "$ref"), ("prefixItems", "tuple"), ("multipleOf", "multipleOf"),
                     ("uniqueItems", "uniqueItems"), ("minProperties", "minProperties"))


def schema_features(schema: Any) -> list[str]:
    """JSON Schema features used anywhere in ``schema`` (sorted names), for per-feature breakdowns."""
    found: set[str] = set()

    def walk(node: Any, depth: int) -> None:
        if isinstance(node, list):
            for x in node:
                walk(x, depth)
            return
        if not isinstance(node, dict):
            return
        t = node.get("type")
        types = t if isinstance(t, list) else [t] if t else []
        if isinstance(t, list) and "null" in t:
            found.add("nullable")
        for ty in types:
            if ty in ("integer", "number", "boolean", "array", "string"):
                found.add(ty)
            if ty == "object" and depth > 0:
                found.add("nested_object")
        found.update(name for key, name in _KEYWORD_FEATURES if key in node)
        if "minimum" in node or "maximum" in node:
            found.add("numeric_bounds")
        if "exclusiveMinimum" in node or "exclusiveMaximum" in node:
            found.add("exclusive_bounds")
        if "minLength" in node or "maxLength" in node:
            found.add("string_length")
        if "minItems" in node or "maxItems" in node:
            found.add("array_length")
        if "format" in node:
            found.add(f"format:{node['format']}")
        if node.get("additionalProperties") is False:
            found.add("closed_object")
        if isinstance(node.get("additionalProperties"), dict):
            found.add("map")
            walk(node["additionalProperties"], depth + 1)
        props = node.get("properties")
        if isinstance(props, dict):
            req = set(node.get("required") or [])
            if set(props) - req:
                found.add("optional_fields")
            for v in props.values():
                walk(v, depth + 1)
        if isinstance(node.get("items"), dict):
            if node["items"].get("type") == "object":
                found.add("array_of_objects")
            walk(node["items"], depth + 1)
        for key in ("prefixItems", "oneOf", "anyOf", "allOf"):
            walk(node.get(key), depth + 1)
        for v in (node.get("$defs") or {}).values():
            walk(v, depth + 1)

    walk(schema, 0)
    return sorted(found)
