"""BFCL function docs -> OpenAI tool definitions, the way BFCL itself builds them for function-calling models.

Why a module of its own: what a model is offered decides what it can answer, so the conversion follows
BFCL's own pre-processing (read in ``bfcl_eval/utils.py`` and ``model_handler/utils.py``, not copied):

- every function description gets BFCL's language hint (Python 3 / Java 8 SDK / JavaScript syntax);
- BFCL type names map to JSON Schema types (``dict`` -> ``object``, ``float`` -> ``number``, ``tuple`` ->
  ``array``, ...); ``any`` and the empty type name ``""`` become ``string``, as BFCL maps them, and a
  property without a type is a string too; a ``float`` property also gets ``format: float`` and the
  sentence BFCL adds to its description;
- Java and JavaScript categories: every top-level parameter is a **string** (BFCL's checker demands a
  string and parses it with its Java/JavaScript converters); its BFCL type moves into the description,
  list element types too, and a JavaScript object's properties move into the description as JSON;
- names: ``.`` and other characters OpenAI refuses become ``_`` (BFCL does the same for OpenAI models).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

#: BFCL type names -> JSON Schema type. Keys are matched as written first, then lower-cased.
TYPE_MAP: dict[str, str] = {
    "dict": "object", "object": "object", "hashmap": "object", "hashtable": "object", "map": "object",
    "float": "number", "double": "number", "number": "number",
    "integer": "integer", "int": "integer", "long": "integer", "short": "integer", "byte": "integer",
    "bigint": "integer",
    "string": "string", "str": "string", "char": "string", "character": "string", "any": "string", "": "string",
    "boolean": "boolean", "bool": "boolean",
    "array": "array", "list": "array", "tuple": "array", "arraylist": "array", "set": "array",
    "queue": "array", "stack": "array",
    "null": "null",
}
_NAME_OK = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

LANGUAGE_HINT = {
    "python": " Note that the provided function is in Python 3 syntax.",
    "java": " Note that the provided function is in Java 8 SDK syntax.",
    "javascript": " Note that the provided function is in JavaScript syntax.",
}
_LANGUAGE_NAME = {"java": "Java", "javascript": "JavaScript"}
_FLOAT_NOTE = " This is a float type value."


class BfclSchemaError(ValueError):
    """A function doc that cannot be converted; the message names the place (``function[0].parameters...``)."""


def language_of(category: str) -> str:
    """BFCL's rule: ``javascript`` in the category -> JavaScript; else ``java`` -> Java; else Python."""
    if "javascript" in category:
        return "javascript"
    if "java" in category:
        return "java"
    return "python"


def json_type(bfcl_type: Any, where: str) -> str:
    if not isinstance(bfcl_type, str):
        raise BfclSchemaError(f"{where}: BFCL type must be a string, got {bfcl_type!r}")
    mapped = TYPE_MAP.get(bfcl_type, TYPE_MAP.get(bfcl_type.lower()))
    if mapped is None:
        raise BfclSchemaError(f"{where}: unknown BFCL type {bfcl_type!r}")
    return mapped


def openai_name(name: str) -> str:
    fixed = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64]
    if not _NAME_OK.match(fixed):
        raise BfclSchemaError(f"function name {name!r} cannot be made OpenAI-compatible")
    return fixed


def convert_schema(node: Any, where: str = "parameters", *, is_property: bool = False) -> dict[str, Any]:
    """One BFCL schema node -> JSON Schema, recursively through properties / items / additionalProperties."""
    if not isinstance(node, dict):
        raise BfclSchemaError(f"{where}: expected an object, got {type(node).__name__}")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type":
            types = value if isinstance(value, list) else [value]
            mapped = [json_type(t, f"{where}.type") for t in types]
            out["type"] = mapped[0] if len(mapped) == 1 else mapped
        elif key == "properties":
            if not isinstance(value, dict):
                raise BfclSchemaError(f"{where}.properties: expected an object")
            out[key] = {k: convert_schema(v, f"{where}.properties.{k}", is_property=True) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = convert_schema(value, f"{where}.{key}")
        elif key == "required" and isinstance(value, list):
            out[key] = [r for r in value if isinstance(r, str)]
        else:
            out[key] = copy.deepcopy(value)
    if "type" not in out and is_property:
        out["type"] = "string"  # BFCL: a property without a type is a string
    if is_property and node.get("type") == "float":
        out["format"] = "float"
        out["description"] = str(out.get("description", "")) + _FLOAT_NOTE
    if isinstance(out.get("required"), list) and isinstance(out.get("properties"), dict):
        out["required"] = [r for r in out["required"] if r in out["properties"]]
    return out


def _stringify_parameter(prop: dict[str, Any], language: str) -> dict[str, Any]:
    """A Java/JavaScript parameter as BFCL offers it: a string, its real type told in the description."""
    lang = _LANGUAGE_NAME[language]
    out = copy.deepcopy(prop)
    bfcl_type = out.get("type", "any")
    desc = str(out.get("description", ""))
    if bfcl_type == "any":
        desc += f" This parameter can be of any type of {lang} object in string representation."
    else:
        desc += f" This is {lang} {bfcl_type} type parameter in string representation."
    list_types = ("ArrayList", "Array") if language == "java" else ("array",)
    if bfcl_type in list_types and isinstance(out.get("items"), dict):
        desc += f" The list elements are of type {out['items'].get('type')}; they are not in string representation."
        del out["items"]
    if language == "javascript" and bfcl_type == "dict" and "properties" in out:
        desc += (" The dictionary entries have the following schema; they are not in string representation. "
                 + json.dumps(out["properties"]))
        del out["properties"]
    out["description"] = desc
    out["type"] = "string"
    return out


def convert_function(fn: Any, index: int, language: str) -> tuple[str, dict[str, Any]]:
    """One BFCL function doc -> (BFCL name, OpenAI tool definition)."""
    where = f"function[{index}]"
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise BfclSchemaError(f"{where}: missing name")
    params = fn.get("parameters") or {"type": "dict", "properties": {}}
    if not isinstance(params, dict):
        raise BfclSchemaError(f"{where}.parameters: expected an object")
    params = copy.deepcopy(params)
    props = params.get("properties", {})
    if not isinstance(props, dict):
        raise BfclSchemaError(f"{where}.parameters.properties: expected an object")
    if language in _LANGUAGE_NAME:
        params["properties"] = {k: _stringify_parameter(v if isinstance(v, dict) else {}, language)
                                for k, v in props.items()}
    converted = convert_schema(params, f"{where}.parameters")
    converted["type"] = "object"  # BFCL sets the top level to object whatever the doc says
    converted.setdefault("properties", {})
    description = str(fn.get("description", "")) + LANGUAGE_HINT[language]
    tool = {"type": "function", "function": {"name": openai_name(fn["name"]), "description": description,
                                             "parameters": converted}}
    return fn["name"], tool


def bfcl_parameter_types(fn: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The raw BFCL parameter docs by name (the importer renders Java/JavaScript answers from them)."""
    props = (fn.get("parameters") or {}).get("properties") or {}
    return {k: v for k, v in props.items() if isinstance(v, dict)}
