"""Convert Berkeley Function Calling Leaderboard (BFCL) question files into tool-call suite JSONL.

BFCL question files are JSON lines ``{"id", "question", "function"}`` in BFCL's own schema dialect:
Python-ish type names (``dict``, ``float``, ``tuple``, ``any``, ``String``, ...), ``question`` as a list
of turns, each a list of messages (older files: a plain list of messages or a string), ``function`` as a
list (or a single object). We map types to JSON Schema, function names to OpenAI-legal names (``.`` ->
``_`` as BFCL itself does for OpenAI models), keep the first turn, and tag each case with its category.

Expected answers: BFCL's ``irrelevance`` category means no tool fits (``expected: null``). With a
possible-answer file, single-call ground truths become ``expected`` calls using the first acceptable
value of each argument (arguments whose first acceptable value is ``""``, BFCL's "may be omitted", are left
out); BFCL accepts several values, so expected_* scores on imported suites are a lower bound.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifier.suite_format import SuiteLineError, case_to_line, parse_case

#: BFCL type names (lower-cased) -> JSON Schema type; ``None`` = no type constraint.
TYPE_MAP: dict[str, str | None] = {
    "dict": "object", "object": "object", "hashmap": "object", "map": "object",
    "float": "number", "double": "number", "number": "number",
    "integer": "integer", "int": "integer", "long": "integer", "short": "integer", "byte": "integer",
    "string": "string", "str": "string", "char": "string", "character": "string",
    "boolean": "boolean", "bool": "boolean",
    "array": "array", "list": "array", "tuple": "array", "arraylist": "array", "set": "array",
    "any": None, "null": "null",
}
_NAME_OK = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class BfclError(ValueError):
    pass


def convert_schema(node: Any, where: str = "parameters") -> Any:
    """BFCL dialect -> JSON Schema (recursively through properties/items/additionalProperties)."""
    if not isinstance(node, dict):
        raise BfclError(f"{where}: expected an object, got {type(node).__name__}")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type":
            types = value if isinstance(value, list) else [value]
            mapped = []
            for t in types:
                if not isinstance(t, str) or t.lower() not in TYPE_MAP:
                    raise BfclError(f"{where}.type: unknown BFCL type {t!r}")
                if TYPE_MAP[t.lower()] is not None:
                    mapped.append(TYPE_MAP[t.lower()])
            if len(mapped) == len(types):
                out["type"] = mapped[0] if len(mapped) == 1 else mapped
        elif key == "properties":
            if not isinstance(value, dict):
                raise BfclError(f"{where}.properties: expected an object")
            out[key] = {k: convert_schema(v, f"{where}.properties.{k}") for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = convert_schema(value, f"{where}.{key}")
        elif key == "required" and isinstance(value, list):
            out[key] = [r for r in value if isinstance(r, str)]
        elif key in ("optional",):
            continue  # BFCL annotation, not JSON Schema
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" not in out and where == "parameters":
        out["properties"] = {}
    if isinstance(out.get("required"), list) and isinstance(out.get("properties"), dict):
        out["required"] = [r for r in out["required"] if r in out["properties"]]
    return out


def openai_name(name: str) -> str:
    fixed = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64]
    if not _NAME_OK.match(fixed):
        raise BfclError(f"function name {name!r} cannot be made OpenAI-compatible")
    return fixed


def _messages(question: Any) -> tuple[list[dict[str, Any]], int]:
    """First turn's messages and the number of turns."""
    if isinstance(question, str):
        return [{"role": "user", "content": question}], 1
    if not isinstance(question, list) or not question:
        raise BfclError("question: expected a non-empty list of turns")
    if all(isinstance(t, list) for t in question):
        turns = question
    elif all(isinstance(m, dict) for m in question):
        turns = [question]
    else:
        raise BfclError("question: expected a list of turns (lists of messages)")
    first = turns[0]
    if not first or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in first):
        raise BfclError("question[0]: expected messages with a role")
    return [{"role": m["role"], "content": m.get("content", "")} for m in first], len(turns)


def _category(case_id: str) -> str:
    m = re.match(r"^(.*?)_\d+(?:-\d+)*$", case_id)
    return m.group(1) if m else "unknown"


def _expected_from_answer(answer: Any, names: dict[str, str]) -> dict[str, Any] | None | str:
    """A possible-answer entry -> expected call, or the string "skip" when it cannot be one call."""
    gt = answer.get("ground_truth") if isinstance(answer, dict) else None
    if not isinstance(gt, list) or len(gt) != 1 or not isinstance(gt[0], dict) or len(gt[0]) != 1:
        return "skip"
    (fname, args), = gt[0].items()
    if fname not in names or not isinstance(args, dict):
        return "skip"
    chosen = {}
    for k, options in args.items():
        if not isinstance(options, list) or not options:
            return "skip"
        if options[0] == "":
            continue
        chosen[k] = options[0]
    return {"tool": names[fname], "arguments": chosen}


@dataclass
class ImportResult:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "file:line: message"
    with_expected: int = 0


def convert_file(path: str | Path, *, answers: str | Path | None = None, strict: bool = False) -> ImportResult:
    """Convert one BFCL question file (JSON lines, or one JSON array) into suite lines."""
    p = Path(path)
    source = str(p)
    if not p.is_file():
        raise SuiteLineError(source, None, "BFCL file not found")
    answer_by_id: dict[str, Any] = {}
    if answers is not None:
        for _, obj, err in _read_objects(Path(answers)):
            if err is None and isinstance(obj, dict) and isinstance(obj.get("id"), str):
                answer_by_id[obj["id"]] = obj
    result = ImportResult()
    for line_no, obj, err in _read_objects(p):
        try:
            if err is not None:
                raise BfclError(err)
            line = _convert_one(obj, answer_by_id, result)
            parse_case(json.loads(line), source, line_no)  # the output must load as a suite line
            result.lines.append(line)
        except (BfclError, SuiteLineError) as exc:
            msg = exc.message if isinstance(exc, SuiteLineError) else str(exc)
            if strict:
                raise SuiteLineError(source, line_no, msg) from None
            result.problems.append(f"{source}:{line_no}: {msg}")
    return result


def _read_objects(p: Path) -> list[tuple[int, Any, str | None]]:
    """(line number, object, error) per entry; a JSON array file counts entries from 1, blank lines are skipped."""
    text = p.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            return [(i, o, None) for i, o in enumerate(json.loads(text), 1)]
        except json.JSONDecodeError:
            pass  # not one array after all: fall back to JSON lines
    out: list[tuple[int, Any, str | None]] = []
    for line_no, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            out.append((line_no, json.loads(raw), None))
        except json.JSONDecodeError as exc:
            out.append((line_no, None, f"not JSON: {exc.msg} at column {exc.colno}"))
    return out


def _convert_one(obj: Any, answer_by_id: dict[str, Any], result: ImportResult) -> str:
    if not isinstance(obj, dict):
        raise BfclError("entry is not a JSON object")
    case_id = obj.get("id")
    if not isinstance(case_id, str) or not case_id:
        raise BfclError("missing 'id'")
    messages, n_turns = _messages(obj.get("question"))
    functions = obj.get("function")
    if isinstance(functions, dict):
        functions = [functions]
    if not isinstance(functions, list) or not functions:
        raise BfclError("missing 'function' (a list of function definitions)")
    tools, names = [], {}
    for i, fn in enumerate(functions):
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise BfclError(f"function[{i}]: missing name")
        name = openai_name(fn["name"])
        names[fn["name"]] = name
        params = convert_schema(fn.get("parameters") or {"type": "dict", "properties": {}}, f"function[{i}].parameters")
        tools.append({"type": "function", "function": {"name": name, "description": str(fn.get("description", "")),
                                                       "parameters": params}})
    category = _category(case_id)
    tags = ["bfcl", f"bfcl:{category}"] + (["bfcl:multi_turn_first_turn_only"] if n_turns > 1 else [])
    meta: dict[str, Any] = {"id": case_id, "tags": tags}
    if category.startswith("irrelevance") or "irrelevance" in category:
        meta["expected"] = None
        result.with_expected += 1
    elif case_id in answer_by_id:
        exp = _expected_from_answer(answer_by_id[case_id], names)
        if exp != "skip":
            meta["expected"] = exp
            result.with_expected += 1
    body = {"messages": messages, "tools": tools, "tool_choice": "auto", "temperature": 0}
    return case_to_line(body, meta)


def write_suite(result: ImportResult, out: str | Path) -> Path:
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(line + "\n" for line in result.lines), encoding="utf-8")
    return p
