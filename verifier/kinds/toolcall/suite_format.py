"""Tool-call suite files: JSONL, one OpenAI chat-completions request body per line.

Why this format: it is what MoonshotAI's K2-Vendor-Verifier ships (``samples.jsonl``), so such files run
unchanged, and anyone can write a case by pasting a request they already send. Conventions:

- each line is a JSON object with ``messages`` (and usually ``tools``); ``model``, ``stream`` and
  ``stream_options`` are removed because the endpoint client fills them per endpoint;
- the K2VV role ``_input`` means ``system``;
- an optional ``_meta`` object carries ``id`` (string), ``tags`` (list of strings) and ``expected``:
  ``{"tool": name, "arguments": {...}}`` when the right answer is that call, ``null`` when no tool fits.
  An absent ``expected`` means "no ground truth", which is not the same as ``null``. An expected call may
  also carry ``options`` (``{"arg": [acceptable values...]}``, BFCL's possible answers as imported by
  ``verifier suites import bfcl``); the scorer then matches by BFCL's rule instead of against ``arguments``.

A bad line raises :class:`SuiteLineError` naming ``file:line`` and the field. Loading is lenient by
default (skip and count the line as an :class:`InputProblem`) and strict on request.

One kind of problem does not skip its line: a tool whose ``parameters`` fails its JSON Schema metaschema.
Providers receive such schemas in real traffic and K2VV sends them, so the line is sent as written, listed
as an :class:`InputProblem` with ``action="sent"``, counted by K2VV's rule (calls of that tool are invalid)
and left out of our own ``schema_accuracy`` denominator (see ``toolcall_scoring``). ``strict`` still
rejects it. Nor does a line that offers the same tool name twice: K2VV sends it, so we send it as written too
(``action="sent"``); calls of that name are validated against the FIRST tool of that name, by K2VV's rule and ours
alike, and the line is listed. Roles pass through unchanged (``function`` included) except K2VV's ``_input``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from verifier.kinds.toolcall.tool_schemas import schema_problem
from verifier.records import SuiteManifest
from verifier.run.summary import InputProblem

#: Roles OpenAI-compatible servers accept, plus K2VV's ``_input`` (rewritten to ``system``).
KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function", "_input"})
#: Body keys the client owns; a suite line may carry them but they are dropped (``stream`` is kept as a hint).
CLIENT_OWNED_KEYS = ("model", "stream", "stream_options")


class SuiteLineError(ValueError):
    """One bad suite line; ``str()`` is a single line ``file:line: what is wrong``."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        self.message = message
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")


class ExpectedCall(BaseModel):
    """The right answer for a case when it is a tool call."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    #: BFCL-style acceptable values per argument (``""`` = may be omitted), from imported BFCL answers;
    #: when present the scorer matches against these lists (verifier.kinds.toolcall.bfcl.options), not ``arguments``.
    options: dict[str, list[Any]] | None = None


class ToolcallCase(BaseModel):
    """One case of a tool-call suite, normalised and ready to send."""

    id: str
    body: dict[str, Any]  # request body without model/stream; roles normalised
    tags: list[str] = Field(default_factory=list)
    has_expected: bool = False  # True when _meta.expected was present (even if null)
    expected: ExpectedCall | None = None
    stream: bool | None = None  # the line's own "stream" value, if it had one
    line: int | None = None
    #: tools whose ``parameters`` fail their metaschema: name -> "tools[i].function.parameters ...: why"
    schema_problems: dict[str, str] = Field(default_factory=dict)
    #: tool names offered more than once: name -> "tools[i].function.name ... offered twice" (first one counts)
    duplicate_tools: dict[str, str] = Field(default_factory=dict)

    def tools(self) -> dict[str, Any]:
        """Offered tools by name -> JSON Schema of their parameters (a tool without any takes an empty object)."""
        out: dict[str, Any] = {}
        for t in self.body.get("tools") or []:
            fn = t.get("function") or {}
            params = fn.get("parameters")
            # a name offered twice: the first tool counts, as in K2VV's validator (next(... for t in tools ...))
            out.setdefault(fn["name"], {"type": "object", "properties": {}} if params is None else params)
        return out

    def forced_tool(self) -> str | None:
        """Name of the function ``tool_choice`` forces, if any."""
        tc = self.body.get("tool_choice")
        if isinstance(tc, dict):
            return (tc.get("function") or {}).get("name")
        return None

    def forced(self) -> str | bool | None:
        """What ``tool_choice`` forces: a function's name, True for ``"required"`` (any offered tool), else None."""
        if self.body.get("tool_choice") == "required":
            return True
        return self.forced_tool()

    def canonical(self) -> dict[str, Any]:
        """What the content hash covers: everything that changes what is sent or how it is scored."""
        return {
            "id": self.id,
            "body": self.body,
            "tags": self.tags,
            "expected": self.expected.model_dump(exclude={"options"} if self.expected.options is None else None)
            if self.expected else None,
            "has_expected": self.has_expected,
            "stream": self.stream,
        }


@dataclass
class LoadedSuite:
    """A parsed suite: what the SuiteKind protocol calls ``LoadedSuite`` (``.manifest``, ``.cases``)."""

    manifest: SuiteManifest
    cases: list[ToolcallCase]
    problems: list[InputProblem] = field(default_factory=list)

    def case(self, case_id: str) -> ToolcallCase | None:
        for c in self.cases:
            if c.id == case_id:
                return c
        return None


def _fail(source: str, line: int | None, message: str) -> None:
    raise SuiteLineError(source, line, message)


@dataclass
class _OfferedTools:
    """What a line's ``tools`` list offers: parameters by name (first tool of a name wins), and the problems that
    do not skip the line (kept, listed as sent): schemas failing their metaschema, names offered twice."""

    by_name: dict[str, Any] = field(default_factory=dict)
    bad_schemas: dict[str, str] = field(default_factory=dict)
    duplicates: dict[str, str] = field(default_factory=dict)


def _check_tools(tools: Any, source: str, line: int | None) -> _OfferedTools:
    """Validate the ``tools`` list; malformed entries raise, the problems K2VV sends anyway are returned."""
    if not isinstance(tools, list):
        _fail(source, line, f"'tools' must be a list, got {type(tools).__name__}")
    found = _OfferedTools()
    names, bad_schemas = found.by_name, found.bad_schemas
    for i, t in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(t, dict):
            _fail(source, line, f"{where} must be an object")
        if t.get("type", "function") != "function":
            _fail(source, line, f"{where}.type must be 'function', got {t.get('type')!r}")
        fn = t.get("function")
        if not isinstance(fn, dict):
            _fail(source, line, f"{where}.function must be an object")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            _fail(source, line, f"{where}.function.name must be a non-empty string")
        if name in names:  # only the first tool of a name is ever validated against (K2VV's rule and ours)
            found.duplicates.setdefault(name, f"{where}.function.name {name!r} is offered twice")
            continue
        params = fn.get("parameters", {"type": "object", "properties": {}})
        problem = schema_problem(params)
        if problem:
            bad_schemas[name] = f"{where}.function.parameters is not a valid JSON Schema: {problem}"
        names[name] = params
    return found


def _check_messages(messages: Any, source: str, line: int | None) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        _fail(source, line, "'messages' must be a non-empty list")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            _fail(source, line, f"messages[{i}] must be an object")
        role = m.get("role")
        if role not in KNOWN_ROLES:
            _fail(source, line, f"messages[{i}].role {role!r} is not one of {sorted(KNOWN_ROLES)}")
        content = m.get("content")
        if content is not None and not isinstance(content, (str, list)):
            _fail(source, line, f"messages[{i}].content must be a string, a list of parts or null")
        m = dict(m)
        if role == "_input":
            m["role"] = "system"
        out.append(m)
    return out


def parse_case(obj: Any, source: str, line: int | None, default_id: str | None = None, *,
               keep_bad_schemas: bool = False) -> ToolcallCase:
    """Validate one decoded line and normalise it into a :class:`ToolcallCase`.

    A tool schema failing its metaschema, or a tool name offered twice, raises like any other problem unless
    ``keep_bad_schemas``: then the case is returned with ``schema_problems`` / ``duplicate_tools`` filled (a lenient
    suite load sends such lines anyway, as K2VV does; a converter such as the BFCL import wants the error).
    """
    if not isinstance(obj, dict):
        _fail(source, line, f"line is JSON but not an object (got {type(obj).__name__})")
    body = {k: v for k, v in obj.items() if k != "_meta" and k not in CLIENT_OWNED_KEYS}
    if "messages" not in body:
        _fail(source, line, "not a chat-completions request: missing 'messages'")
    body["messages"] = _check_messages(body["messages"], source, line)
    tools = _OfferedTools()
    if "tools" in body and body["tools"] is not None:
        tools = _check_tools(body["tools"], source, line)
        if (tools.bad_schemas or tools.duplicates) and not keep_bad_schemas:
            _fail(source, line, next(iter({**tools.duplicates, **tools.bad_schemas}.values())))
    offered = tools.by_name
    tc = body.get("tool_choice")
    if isinstance(tc, dict):
        fname = (tc.get("function") or {}).get("name") if isinstance(tc.get("function"), dict) else None
        if fname not in offered:
            _fail(source, line, f"tool_choice forces {fname!r}, which is not among the offered tools")
    elif tc is not None and tc not in ("auto", "none", "required"):
        _fail(source, line, f"tool_choice must be 'auto', 'none', 'required' or an object, got {tc!r}")
    stream = obj.get("stream")
    if stream is not None and not isinstance(stream, bool):
        _fail(source, line, f"'stream' must be true or false, got {stream!r}")

    meta = obj.get("_meta") or {}
    if not isinstance(meta, dict):
        _fail(source, line, "'_meta' must be an object")
    case_id = meta.get("id", default_id)
    if not isinstance(case_id, str) or not case_id:
        _fail(source, line, "_meta.id must be a non-empty string")
    tags = meta.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        _fail(source, line, "_meta.tags must be a list of strings")
    has_expected = "expected" in meta
    expected = None
    if has_expected and meta["expected"] is not None:
        exp = meta["expected"]
        if not isinstance(exp, dict) or not isinstance(exp.get("tool"), str):
            _fail(source, line, "_meta.expected must be null or {\"tool\": name, \"arguments\": {...}}")
        if exp["tool"] not in offered:
            _fail(source, line, f"_meta.expected.tool {exp['tool']!r} is not among the offered tools")
        args = exp.get("arguments", {})
        if not isinstance(args, dict):
            _fail(source, line, "_meta.expected.arguments must be an object")
        options = exp.get("options")
        if options is not None and not (isinstance(options, dict) and all(
                isinstance(v, list) and v for v in options.values())):
            _fail(source, line, "_meta.expected.options must be an object of non-empty lists of acceptable values")
        expected = ExpectedCall(tool=exp["tool"], arguments=args, options=options)
    return ToolcallCase(
        id=case_id, body=body, tags=list(tags), has_expected=has_expected, expected=expected, stream=stream, line=line,
        schema_problems=tools.bad_schemas, duplicate_tools=tools.duplicates,
    )


def _body_digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def content_hash(cases: Iterable[ToolcallCase]) -> str:
    """sha256 over the canonical JSON of the cases, in order: the suite's identity in results."""
    h = hashlib.sha256()
    for c in cases:
        h.update(json.dumps(c.canonical(), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()


def load_jsonl(
    path: str | Path,
    *,
    name: str | None = None,
    version: str = "1",
    strict: bool = False,
    source_label: str | None = None,
) -> LoadedSuite:
    """Read a suite file. Bad lines raise (``strict``) or are skipped and reported as InputProblems.

    Cases without ``_meta.id`` get ``L<line>-<8 hex of the body>``, stable for a given file.
    """
    p = Path(path)
    source = source_label or str(p)
    if not p.is_file():
        raise SuiteLineError(source, None, "suite file not found")
    cases: list[ToolcallCase] = []
    problems: list[InputProblem] = []
    seen: set[str] = set()
    with p.open("r", encoding="utf-8") as fh:
        for line_no, raw in enumerate(fh, 1):
            text = raw.strip()
            if not text:
                continue
            try:
                try:
                    obj = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise SuiteLineError(source, line_no, f"not JSON: {exc.msg} at column {exc.colno}") from None
                has_id = isinstance(obj, dict) and isinstance(obj.get("_meta"), dict) and "id" in obj["_meta"]
                default_id = None if has_id else f"L{line_no}-{_body_digest(obj)[:8]}"
                case = parse_case(obj, source, line_no, default_id=default_id, keep_bad_schemas=not strict)
                if case.id in seen:
                    raise SuiteLineError(source, line_no, f"duplicate _meta.id {case.id!r}")
            except SuiteLineError as exc:
                if strict:
                    raise
                problems.append(InputProblem(source=source, line=exc.line, message=exc.message))
                continue
            seen.add(case.id)
            cases.append(case)
            problems += [InputProblem(source=source, line=line_no, action="sent",
                                      message=f"{msg} (sent anyway; K2VV counts calls of {name!r} as invalid)")
                         for name, msg in case.schema_problems.items()]
            problems += [InputProblem(source=source, line=line_no, action="sent",
                                      message=f"{msg} (sent as written, as K2VV does; calls of {name!r} are "
                                              f"validated against the first tool of that name)")
                         for name, msg in case.duplicate_tools.items()]
    manifest = SuiteManifest(
        name=name or p.stem,
        version=version,
        kind="toolcall",
        case_count=len(cases),
        content_hash=content_hash(cases),
        source=source,
        skipped_lines=sum(1 for p in problems if p.action == "skipped"),
    )
    return LoadedSuite(manifest=manifest, cases=cases, problems=problems)


def case_to_line(body: dict[str, Any], meta: dict[str, Any] | None = None) -> str:
    """Serialise one case as a suite line (compact JSON, ``_meta`` last)."""
    obj = dict(body)
    if meta is not None:
        obj["_meta"] = meta
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def write_jsonl(path: str | Path, lines: Iterable[tuple[dict[str, Any], dict[str, Any] | None]]) -> int:
    """Write ``(body, meta)`` pairs as a suite file; returns the number of lines written."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with p.open("w", encoding="utf-8") as fh:
        for body, meta in lines:
            fh.write(case_to_line(body, meta) + "\n")
            n += 1
    return n
