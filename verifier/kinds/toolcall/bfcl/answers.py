"""BFCL possible answers -> ``_meta.expected`` (a canonical call plus BFCL's option lists).

Why: BFCL gives, per parameter, every acceptable value (``""`` = may be omitted), nested objects keep
option lists at every key. The suite keeps those lists in ``_meta.expected.options`` (scored by
:mod:`verifier.kinds.toolcall.bfcl.options`) and adds one canonical ``arguments`` object, the first acceptable value of
each parameter that fits the converted schema (used by exact-match metrics and checked against the
schema at import).

Java and JavaScript parameters are strings on the wire, so their options are rendered as the source
text BFCL's converters read back into the answer's value: ``true``, ``50``, ``50L`` (Java long),
``3.5f`` (Java float), ``10n`` (JavaScript BigInt), ``new ArrayList<>(Arrays.asList(1L, 2L))`` (also
``<Long>`` and ``<Object>``),
``new int[]{1, 2}``, ``new HashMap<String, Object>() {{ put("k", 1); }}``, ``[60, 30]``,
``{key: "value"}``. BFCL parses the model's string and compares values; here the model's string is
compared with these renderings after BFCL's string standardisation (spaces and ``,./-_*^`` ignored,
case folded). Scalars, the large majority, match exactly as in BFCL; a collection written in a spelling
BFCL's regex converters also read but not listed here (text after the literal, single-quoted HashMap
keys, which BFCL refuses and this accepts) can differ. Element texts follow BFCL's converter quirks
(``long`` elements need ``L``; ``String`` elements are quoted in an ``ArrayList`` but not in an
``Array``), so the canonical answer is one BFCL's own checker accepts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from verifier.kinds.toolcall.tool_schemas import validator

OMIT = ""  # BFCL's "this parameter may be left out"
#: BFCL's converter reads any generic argument (``new ArrayList<Long>(...)``): the usual spellings are options.
_JAVA_BOXED = {"integer": "Integer", "long": "Long", "String": "String", "char": "Character", "float": "Float",
               "double": "Double", "boolean": "Boolean", "byte": "Byte", "short": "Short", "any": "Object"}
_JAVA_ARRAY_ELEMENT = {"integer": "int", "String": "String", "long": "long", "char": "char", "float": "float",
                       "double": "double", "boolean": "boolean", "byte": "byte", "short": "short", "any": "Object"}


@dataclass
class ExpectedAnswer:
    """What ``_meta.expected`` gets for one case."""

    tool: str
    arguments: dict[str, Any]
    options: dict[str, list[Any]]
    schema_problem: str | None = None  # the canonical arguments fail the converted schema: why
    schema_problem_cause: str | None = None  # "bfcl data" or "converter"

    def as_meta(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": self.arguments, "options": self.options}


@dataclass
class AnswerSkip:
    """Why an entry gets no expected call (the case is still imported)."""

    reason: str
    detail: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- Java / JavaScript renderings


def _java_scalar(value: Any) -> str:
    """A value inside a Java collection of unknown element type (BFCL's ``parse_java_value`` reads it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _java_element(value: Any, item_type: str | None, container: str) -> str:
    """A collection element as BFCL's Java converter reads it for the declared element type.

    BFCL strips the quotes of ``String`` elements in an ``ArrayList`` but not in an ``Array``, and
    reads ``any`` elements as raw text, so those are written unquoted, as its checker expects.
    """
    if item_type is None:
        return _java_scalar(value)
    if isinstance(value, str):
        if item_type == "String" and container == "ArrayList":
            return json.dumps(value)
        if item_type == "char" and container == "ArrayList":
            return f"'{value}'"
        return value
    return render_java(value, item_type, None)[0]


def _first_choice(options: Any) -> Any:
    """The first acceptable value of an option list (nested option objects resolved the same way)."""
    if isinstance(options, list):
        for option in options:
            if option != OMIT:
                return resolve(option)
        return OMIT
    return options


def resolve(option: Any) -> Any:
    """An option as a plain value: nested option objects ``{"k": [v, ...]}`` take their first choices."""
    if isinstance(option, dict):
        out = {}
        for k, choices in option.items():
            v = _first_choice(choices) if isinstance(choices, list) else choices
            if v != OMIT:
                out[k] = v
        return out
    if isinstance(option, list):
        return [resolve(x) for x in option]
    return option


def render_java(value: Any, bfcl_type: str, item_type: str | None) -> list[str]:
    """Java source text(s) that BFCL's Java converter reads as ``value`` for a parameter of ``bfcl_type``."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if bfcl_type == "long":
            return [f"{int(value)}L"]
        if bfcl_type == "float":
            texts = [f"{value!r}f"]
            return texts + ([f"{int(value)}f"] if float(value).is_integer() else [])
        if bfcl_type == "double":
            return [repr(float(value))] + ([str(int(value))] if float(value).is_integer() else [])
        return [repr(value)]
    if isinstance(value, list):
        container = "Array" if bfcl_type == "Array" else "ArrayList"
        items = ", ".join(_java_element(resolve(x), item_type, container) for x in value)
        if bfcl_type == "Array":
            element = _JAVA_ARRAY_ELEMENT.get(item_type or "any", "Object")
            return [f"new {element}[]{{{items}}}"]
        generics = dict.fromkeys(["", _JAVA_BOXED.get(item_type or "any", "Object"), "Object"])
        if not value:
            return [f"new ArrayList<{g}>()" for g in generics]
        return [f"new ArrayList<{g}>(Arrays.asList({items}))" for g in generics]
    if isinstance(value, dict):
        plain = resolve(value)
        puts = " ".join(f"put({json.dumps(k)}, {_java_scalar(v)});" for k, v in plain.items())
        return [f"new HashMap<String, Object>() {{{{ {puts} }}}}" if plain else "new HashMap<>()"]
    return [json.dumps(value)]


def _js_literal(value: Any, quote_keys: bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_js_literal(x, quote_keys) for x in value) + "]"
    if isinstance(value, dict):
        keys = (json.dumps(k) if quote_keys else k for k in value)
        return "{" + ", ".join(f"{k}: {_js_literal(v, quote_keys)}" for k, v in zip(keys, value.values())) + "}"
    if value is None:
        return "null"
    return repr(value)


def render_javascript(value: Any, bfcl_type: str) -> list[str]:
    """JavaScript source text(s) that BFCL's JavaScript converter reads as ``value``."""
    if isinstance(value, str):
        return [value, json.dumps(value)] if bfcl_type == "String" else [value]
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, (int, float)):
        if bfcl_type == "Bigint":
            return [f"{int(value)}n"]
        texts = [repr(value)]
        if isinstance(value, float) and value.is_integer():
            texts.append(str(int(value)))
        elif isinstance(value, int) and bfcl_type == "float":
            texts.append(repr(float(value)))
        return texts
    plain = resolve(value)
    texts = [_js_literal(plain, quote_keys=False)]
    if isinstance(plain, dict):
        texts.append(_js_literal(plain, quote_keys=True))
    return texts


def render_options(options: list[Any], language: str, doc: dict[str, Any]) -> list[Any]:
    """One parameter's BFCL options as they travel for ``language`` (Python: unchanged)."""
    if language == "python":
        return options
    bfcl_type = str(doc.get("type", "any"))
    item_type = (doc.get("items") or {}).get("type") if isinstance(doc.get("items"), dict) else None
    out: list[Any] = []
    for option in options:
        if option == OMIT:
            out.append(OMIT)
            continue
        texts = render_java(option, bfcl_type, item_type) if language == "java" else render_javascript(option,
                                                                                                       bfcl_type)
        out.extend(t for t in texts if t not in out)
    return out


# --------------------------------------------------------------------------- answers -> expected


def _fits(value: Any, schema: dict[str, Any]) -> bool:
    return not any(True for _ in validator(schema).iter_errors(value))


def _canonical(options: list[Any], schema: dict[str, Any], required: bool) -> Any:
    """First acceptable value that fits the parameter's schema; OMIT when BFCL lists omission first."""
    if options and options[0] == OMIT and not required:
        return OMIT
    candidates = [resolve(o) for o in options if o != OMIT]
    for value in candidates:
        if _fits(value, schema):
            return value
    return candidates[0] if candidates else OMIT


def expected_from_answer(answer: dict[str, Any], bfcl_docs: dict[str, dict[str, Any]],
                         tools: dict[str, dict[str, Any]], names: dict[str, str], language: str
                         ) -> ExpectedAnswer | AnswerSkip:
    """One possible-answer entry of a single-call category -> the case's expected call.

    ``bfcl_docs``: BFCL function docs by BFCL name; ``tools``: converted tool definitions by OpenAI
    name; ``names``: BFCL name -> OpenAI name.
    """
    gt = answer.get("ground_truth")
    if not isinstance(gt, list) or not gt:
        return AnswerSkip("answer has no ground_truth calls")
    if len(gt) != 1:
        return AnswerSkip("BFCL expects several calls at once (parallel); a suite answer is one call")
    if not isinstance(gt[0], dict) or len(gt[0]) != 1:
        return AnswerSkip("ground_truth[0] is not {function: {parameter: options}}")
    (fname, args), = gt[0].items()
    if fname not in names or not isinstance(args, dict):
        return AnswerSkip("answer names a function the entry does not offer")
    if any(not isinstance(v, list) or not v for v in args.values()):
        return AnswerSkip("BFCL's answer lists no acceptable value for a parameter (no reply matches it, in BFCL too)")
    tool = tools[names[fname]]["function"]
    schema = tool["parameters"]
    docs = (bfcl_docs[fname].get("parameters") or {}).get("properties") or {}
    required = set(schema.get("required") or [])
    options = {k: render_options(v, language, docs.get(k, {})) for k, v in args.items()}
    arguments = {}
    for k, opts in options.items():
        prop = (schema.get("properties") or {}).get(k, {})
        value = _canonical(opts, prop, k in required)
        if value != OMIT:
            arguments[k] = value
    exp = ExpectedAnswer(tool=names[fname], arguments=arguments, options=options)
    errors = sorted(validator(schema).iter_errors(arguments), key=lambda e: list(e.path))
    undeclared = sorted(set(args) - set(schema.get("properties") or {}))
    if errors:
        err = errors[0]
        exp.schema_problem = f"{'.'.join(str(p) for p in err.path) or '(top)'}: {err.message}"
        exp.schema_problem_cause = _blame(err, args, docs, language)
    elif undeclared:  # BFCL's checker refuses a parameter its doc does not declare: no reply can match
        exp.schema_problem = f"{undeclared[0]}: the answer names a parameter the function does not declare"
        exp.schema_problem_cause = "bfcl data"
    return exp


def _blame(err: Any, raw_args: dict[str, list[Any]], docs: dict[str, Any], language: str) -> str:
    """Whose fault is a canonical answer that fails its schema: BFCL's data, or this converter?

    BFCL's data is at fault when no option BFCL lists has the type BFCL's own doc declares (for
    example an ``any`` parameter, a string for BFCL, answered with a number, or ``null``), when the
    answer lies outside the doc's own ``enum`` (BFCL's checker never looks at enums), or when a required
    parameter's only option is ``""``. Anything else is counted against the converter.
    """
    path = list(err.path)
    if err.validator == "enum":
        return "bfcl data"
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else ""
        opts = raw_args.get(missing)
        return "bfcl data" if opts is None or all(o == OMIT for o in opts) else "converter"
    if not path:
        return "converter"
    param = str(path[0])
    doc_type = str(docs.get(param, {}).get("type", ""))
    python_types: dict[str, type | tuple[type, ...]] = {
        "string": str, "any": str, "integer": int, "boolean": bool, "dict": dict, "array": list, "tuple": list,
        "float": (int, float)}
    python_type = python_types.get(doc_type)
    if language == "python" and python_type is not None:
        ok = [o for o in raw_args.get(param, []) if o != OMIT and o is not None and isinstance(o, python_type)
              and not (python_type is int and isinstance(o, bool))]
        if not ok and len(path) == 1:
            return "bfcl data"
    return "converter"
