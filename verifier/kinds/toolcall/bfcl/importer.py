"""Convert Berkeley Function Calling Leaderboard (BFCL) question files into tool-call suite JSONL.

BFCL question files are JSON lines ``{"id", "question", "function"}``: ``question`` is a list of turns,
each a list of messages; ``function`` the offered function docs in BFCL's dialect (converted by
:mod:`verifier.kinds.toolcall.bfcl.schema` as BFCL converts them for function-calling models). Every case is tagged
``bfcl`` and ``bfcl:<category>``.

Categories and what becomes of them (one suite request is one model reply, so what needs several
replies or executed tools keeps only what one reply can be judged on):

- single-call categories (``simple_*``, ``multiple``, ``live_simple``, ``live_multiple``): with the
  possible-answer file, ``_meta.expected`` = the call, BFCL's option lists kept
  (:mod:`verifier.kinds.toolcall.bfcl.answers`);
- ``irrelevance``, ``live_irrelevance``: ``expected: null`` (no call is right); an entry offering no
  function at all is sent without ``tools``;
- ``parallel*``, ``live_relevance``: imported without expected answer (BFCL wants several calls at once,
  or any call);
- ``multi_turn_*`` (``involved_classes``): tools come from ``--func-docs`` (BFCL's
  ``multi_turn_func_doc/``), less the functions BFCL holds out (``missed_function``); the first turn is
  imported. Where BFCL's answer for that turn is no call (``miss_param``, ``miss_func``), ``expected:
  null``, BFCL's own rule for such turns; otherwise no expected answer, because BFCL judges those turns by
  executing the calls and comparing backend state. Later turns need the model's own earlier replies and
  executed tool results, so they are counted as not imported;
- ``memory`` (one case per memory backend, as BFCL expands it: ``memory_kv``, ``memory_vector``,
  ``memory_rec_sum``) and ``web_search``: first turn with the backend's tools, no expected answer (BFCL
  checks the final text answer). BFCL also prepends system prompts built from a live memory backend;
  they are not reproduced;
- ``format_sensitivity`` is an index of other entries' ids, not questions: the file is skipped.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifier.kinds.toolcall.bfcl.answers import AnswerSkip, expected_from_answer
from verifier.kinds.toolcall.bfcl.schema import BfclSchemaError, convert_function, language_of
from verifier.kinds.toolcall.suite_format import SuiteLineError, case_to_line, parse_case

#: BFCL backend class -> its file in ``multi_turn_func_doc/`` (BFCL's own mapping).
FUNC_DOC_FILES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json", "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json", "MemoryAPI_kv": "memory_kv.json", "MemoryAPI_vector": "memory_vector.json",
    "MemoryAPI_rec_sum": "memory_rec_sum.json",
}
#: BFCL expands each memory question into one test per backend.
MEMORY_BACKENDS = ("kv", "vector", "rec_sum")

# Reasons, named once so the summary table groups them.
NO_FUNC_DOCS = "needs --func-docs DIR (BFCL's multi_turn_func_doc/) for its involved_classes"
FORMAT_INDEX = "format_sensitivity index: ids of other entries, not questions"
NO_ANSWER_ENTRY = "no entry in the possible-answer file"
NOT_IN_ANSWERS_FILE = "no possible-answer file given"
EXEC_CHECKED = "multi-turn turn judged by executing calls against BFCL's backends (state check)"
TEXT_ANSWER = "BFCL's answer is the final text, not a call"
ANY_CALL = "live_relevance: any call is right, no answer to match"


class BfclError(ValueError):
    """One bad BFCL entry; the message says what is wrong."""


class BfclFileError(ValueError):
    """A file that cannot be used at all; ``str()`` is one line naming the file (and line)."""


@dataclass
class ImportResult:
    """One question file's conversion: the suite lines and every count the summary table shows."""

    source: str
    answers: str | None = None
    entries: int = 0
    lines: list[str] = field(default_factory=list)
    with_expected: int = 0
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> entries not imported
    problems: list[str] = field(default_factory=list)  # "file:line: message" for skipped entries
    no_expected: Counter[str] = field(default_factory=Counter)  # reason -> imported without an answer
    later_turns: int = 0  # multi-turn turns after the first, not imported
    schema_failures: list[str] = field(default_factory=list)  # "id: cause: problem"

    @property
    def imported(self) -> int:
        return len(self.lines)

    def failures_by_cause(self) -> Counter[str]:
        return Counter(f.split(": ", 2)[1] for f in self.schema_failures)


# --------------------------------------------------------------------------- reading files


def read_entries(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, object, error) per JSON line; a whole-file JSON document is entry 1."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BfclFileError(f"{path}: cannot read: {exc}") from None
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")) and "\n" in stripped.rstrip():
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # JSON lines after all
        if isinstance(whole, list):
            yield from ((i, o, None) for i, o in enumerate(whole, 1))
            return
        if isinstance(whole, dict):
            yield 1, whole, None
            return
    for line_no, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            yield line_no, json.loads(raw), None
        except json.JSONDecodeError as exc:
            yield line_no, None, f"not JSON: {exc.msg} at column {exc.colno}"


def load_answers(path: Path) -> dict[str, dict[str, Any]]:
    """Possible-answer entries by id; any bad line is fatal (answers silently lost would skew scores)."""
    if not path.is_file():
        raise BfclFileError(f"{path}: possible-answer file not found")
    out: dict[str, dict[str, Any]] = {}
    for line_no, obj, err in read_entries(path):
        if err is not None:
            raise BfclFileError(f"{path}:{line_no}: {err}")
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or "ground_truth" not in obj:
            raise BfclFileError(f"{path}:{line_no}: not a possible-answer entry (needs 'id' and 'ground_truth')")
        out[obj["id"]] = obj
    return out


class FuncDocs:
    """BFCL's ``multi_turn_func_doc/`` folder, read lazily, one file per backend class."""

    def __init__(self, folder: Path) -> None:
        if not folder.is_dir():
            raise BfclFileError(f"{folder}: --func-docs folder not found")
        self.folder = folder
        self._cache: dict[str, list[dict[str, Any]]] = {}

    def functions(self, cls: str) -> list[dict[str, Any]]:
        if cls not in FUNC_DOC_FILES:
            raise BfclError(f"involved class {cls!r} is not one BFCL knows ({', '.join(FUNC_DOC_FILES)})")
        if cls not in self._cache:
            path = self.folder / FUNC_DOC_FILES[cls]
            if not path.is_file():
                raise BfclFileError(f"{path}: function-doc file for {cls} not found")
            docs = []
            for line_no, obj, err in read_entries(path):
                if err is not None:
                    raise BfclFileError(f"{path}:{line_no}: {err}")
                if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                    raise BfclFileError(f"{path}:{line_no}: not a function doc (needs 'name')")
                docs.append(obj)
            self._cache[cls] = docs
        return self._cache[cls]


# --------------------------------------------------------------------------- one entry


def category_of(case_id: str) -> str:
    """BFCL's rule: the id less its last ``_<index>`` part (``live_simple_3-1-0`` -> ``live_simple``)."""
    return case_id.split(":")[0].rsplit("_", 1)[0] if "_" in case_id else "unknown"


def _turns(question: Any) -> list[list[dict[str, Any]]]:
    if isinstance(question, str):
        return [[{"role": "user", "content": question}]]
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
    return turns


class _Skip(Exception):
    """An entry left out for a named reason (not an error in the file)."""


@dataclass
class _Case:
    """One case ready to become a suite line."""

    case_id: str
    category: str
    messages: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    n_turns: int
    extra_tags: list[str] = field(default_factory=list)


def _cases_of(obj: dict[str, Any], func_docs: FuncDocs | None) -> list[_Case]:
    case_id = obj["id"]
    category = category_of(case_id)
    turns = _turns(obj.get("question"))
    messages = [{"role": m["role"], "content": m.get("content", "")} for m in turns[0]]
    if "involved_classes" not in obj:
        functions = obj.get("function")
        if isinstance(functions, dict):
            functions = [functions]
        if functions is None:
            raise BfclError("missing 'function' (a list of function definitions) and no 'involved_classes'")
        if not isinstance(functions, list):
            raise BfclError("'function' must be a list of function definitions")
        return [_Case(case_id, category, messages, functions, len(turns))]
    classes = obj["involved_classes"]
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise BfclError("'involved_classes' must be a list of class names")
    if func_docs is None:
        raise _Skip(NO_FUNC_DOCS)
    if category == "memory":
        return [_Case(case_id.replace("memory", f"memory_{b}", 1), f"memory_{b}", messages,
                      list(func_docs.functions(f"MemoryAPI_{b}")), len(turns),
                      [f"bfcl:scenario:{obj.get('scenario', 'unknown')}"]) for b in MEMORY_BACKENDS]
    functions = [fn for cls in classes for fn in func_docs.functions(cls)]
    held_out = {name for names in (obj.get("missed_function") or {}).values() for name in names}
    functions = [fn for fn in functions if fn["name"] not in held_out]
    return [_Case(case_id, category, messages, functions, len(turns))]


def _line_for(case: _Case, answers: dict[str, dict[str, Any]] | None, result: ImportResult) -> str:
    language = language_of(case.category)
    tools: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    docs: dict[str, Any] = {}
    for i, fn in enumerate(case.functions):
        bfcl_name, tool = convert_function(fn, i, language)
        if tool["function"]["name"] in {t["function"]["name"] for t in tools}:
            raise BfclError(f"function[{i}]: name {tool['function']['name']!r} offered twice")
        names[bfcl_name] = tool["function"]["name"]
        docs[bfcl_name] = fn
        tools.append(tool)
    tags = ["bfcl", f"bfcl:{case.category}", *case.extra_tags]
    if case.n_turns > 1:
        tags.append(f"bfcl:first_turn_of:{case.n_turns}")
        result.later_turns += case.n_turns - 1
    meta: dict[str, Any] = {"id": case.case_id, "tags": tags}
    answer_id = case.case_id if not case.category.startswith("memory_") else case.case_id.replace(
        case.category, "memory", 1)
    cat = case.category
    if "irrelevance" in cat:
        meta["expected"] = None
    elif cat.startswith(("memory", "web_search")):
        result.no_expected[TEXT_ANSWER] += 1
    elif cat == "live_relevance":
        result.no_expected[ANY_CALL] += 1
    elif answers is None:
        result.no_expected[NOT_IN_ANSWERS_FILE] += 1
    elif answer_id not in answers:
        result.no_expected[NO_ANSWER_ENTRY] += 1
    elif cat.startswith("multi_turn"):
        gt = answers[answer_id].get("ground_truth")
        if isinstance(gt, list) and gt and gt[0] == []:
            meta["expected"] = None  # BFCL's rule for a turn whose answer is no call
        else:
            result.no_expected[EXEC_CHECKED] += 1
    else:
        tool_defs = {t["function"]["name"]: t for t in tools}
        exp = expected_from_answer(answers[answer_id], docs, tool_defs, names, language)
        if isinstance(exp, AnswerSkip):
            result.no_expected[exp.reason] += 1
        else:
            meta["expected"] = exp.as_meta()
            if exp.schema_problem:
                result.schema_failures.append(f"{case.case_id}: {exp.schema_problem_cause}: {exp.schema_problem}")
    if "expected" in meta:
        result.with_expected += 1
    body: dict[str, Any] = {"messages": case.messages}
    if tools:
        body["tools"] = tools
        body["tool_choice"] = "auto"
    body["temperature"] = 0
    return case_to_line(body, meta)


# --------------------------------------------------------------------------- one file


def _is_format_index(obj: Any) -> bool:
    return (isinstance(obj, dict) and "id" not in obj and bool(obj)
            and all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in obj.values()))


def convert_file(path: str | Path, *, answers: str | Path | None = None, func_docs: str | Path | FuncDocs | None = None,
                 strict: bool = False) -> ImportResult:
    """Convert one BFCL question file into suite lines, counting what is skipped and why.

    Raises :class:`BfclFileError` for a file that cannot be used at all (missing, unreadable, a bad
    answers or function-doc file); with ``strict``, :class:`SuiteLineError` at the first bad entry.
    """
    p = Path(path)
    source = str(p)
    if not p.is_file():
        raise BfclFileError(f"{source}: BFCL question file not found")
    answer_by_id = load_answers(Path(answers)) if answers is not None else None
    docs = func_docs if isinstance(func_docs, FuncDocs) or func_docs is None else FuncDocs(Path(func_docs))
    result = ImportResult(source=source, answers=str(answers) if answers is not None else None)
    for line_no, obj, err in read_entries(p):
        result.entries += 1
        try:
            if err is not None:
                raise BfclError(err)
            if _is_format_index(obj):
                raise _Skip(FORMAT_INDEX)
            if not isinstance(obj, dict):
                raise BfclError("entry is not a JSON object")
            if not isinstance(obj.get("id"), str) or not obj["id"]:
                raise BfclError("missing 'id'")
            for case in _cases_of(obj, docs):
                try:
                    line = _line_for(case, answer_by_id, result)
                except BfclSchemaError as exc:
                    raise BfclError(str(exc)) from None
                parse_case(json.loads(line), source, line_no)  # the output must load as a suite line
                result.lines.append(line)
        except _Skip as skip:
            result.skipped[str(skip)] += 1
        except (BfclError, BfclSchemaError, SuiteLineError) as exc:
            msg = exc.message if isinstance(exc, SuiteLineError) else str(exc)
            entry = f" (id {obj['id']})" if isinstance(obj, dict) and isinstance(obj.get("id"), str) else ""
            if strict:
                raise SuiteLineError(source, line_no, msg + entry) from None
            result.problems.append(f"{source}:{line_no}: {msg}{entry}")
            result.skipped[f"bad entry: {_reason_kind(msg)}"] += 1
    return result


def _reason_kind(msg: str) -> str:
    """A problem message without the parts that differ per entry, so the table can group them."""
    return re.sub(r"function\[\d+\]", "function[i]", msg.split(" (id ")[0])[:90]


def default_answers(question_file: Path) -> Path | None:
    """BFCL's layout: ``possible_answer/<same file name>`` beside the question file, if present."""
    candidate = question_file.parent / "possible_answer" / question_file.name
    return candidate if candidate.is_file() else None


def default_func_docs(question_file: Path) -> Path | None:
    candidate = question_file.parent / "multi_turn_func_doc"
    return candidate if candidate.is_dir() else None


def write_suite(result: ImportResult, out: str | Path) -> Path:
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(line + "\n" for line in result.lines), encoding="utf-8")
    return p
