"""One tool-call reply, judged: each call parsed and validated against the offered tools, arguments compared.

Why apart from the metrics in :mod:`verifier.kinds.toolcall.scoring`: these checks are the per-reply rules
(what makes a call valid, when two calls agree), used alike by scoring, by the training data's self-checks and by
the evaluation of the shipped model; the metrics only count their verdicts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from jsonschema import FormatChecker

from verifier.json_depth import MAX_ARGUMENT_DEPTH, too_deep
from verifier.kinds.toolcall import tool_schemas
from verifier.kinds.toolcall.bfcl.options import args_match_options
from verifier.kinds.toolcall.suite_format import ExpectedCall, ToolcallCase
from verifier.records import ExchangeRecord

EXCERPT_CHARS = 300

# --------------------------------------------------------------------------- argument validation

#: A fixed set of format checks, so results do not depend on which optional packages are installed.
FORMAT_CHECKER = FormatChecker(formats=("date", "email", "ipv4", "ipv6", "uuid", "regex"))


@FORMAT_CHECKER.checks("date-time", raises=ValueError)
def _is_datetime(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if "T" not in value and "t" not in value:
        raise ValueError("no T separator")
    datetime.fromisoformat(value.replace("z", "Z"))
    return True


@FORMAT_CHECKER.checks("time", raises=ValueError)
def _is_time(value: object) -> bool:
    if isinstance(value, str):
        datetime.fromisoformat(f"{date(2000, 1, 1).isoformat()}T{value.replace('z', 'Z')}")
    return True


@dataclass
class CallCheck:
    """One tool call, judged against the case's offered tools."""

    name: str | None
    raw_arguments: str
    arguments: Any = None  # parsed JSON, when it parsed
    status: str = "valid"  # valid | unknown_tool | not_json | schema_violation | tool_schema_invalid
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.status == "valid"

    @property
    def judged(self) -> bool:
        """False for a call of a tool whose own schema is invalid: nothing can be said of its arguments."""
        return self.status != "tool_schema_invalid"

    def canonical(self) -> str:
        if self.status in ("not_json",):
            return f"{self.name}(<unparsed> {self.raw_arguments[:200]})"
        return f"{self.name}({json.dumps(self.arguments, sort_keys=True, ensure_ascii=False)})"


def check_call(name: str | None, raw_arguments: str, tools: dict[str, Any]) -> CallCheck:
    """Parse and validate one call; the first failing check decides its status."""
    c = CallCheck(name=name, raw_arguments=raw_arguments or "")
    text = c.raw_arguments.strip() or "{}"  # an empty string is how some servers send "no arguments"
    if too_deep(text):
        # the client classifies such a reply malformed_response; a record from before that rule lands here, and
        # must be one invalid call, not a RecursionError that loses the suite's results
        c.status, c.error = "not_json", f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels"
        return c
    try:
        c.arguments = json.loads(text)
    except json.JSONDecodeError as exc:
        c.status, c.error = "not_json", f"arguments are not JSON: {exc.msg} at char {exc.pos}"
        return c
    if name not in tools:
        c.status, c.error = "unknown_tool", f"tool {name!r} was not offered"
        return c
    problem = tool_schemas.schema_problem(tools[name])
    if problem is not None:
        c.status, c.error = "tool_schema_invalid", f"tool {name!r} offers an invalid schema: {problem}"[:300]
        return c
    if not isinstance(c.arguments, dict):
        c.status, c.error = "schema_violation", f"arguments are JSON {type(c.arguments).__name__}, not an object"
        return c
    j = tool_schemas.first_error(tools[name], c.arguments, text, FORMAT_CHECKER)  # memoised by the text
    if j.failure is not None:  # e.g. an unresolvable $ref: the schema cannot be applied
        c.status, c.error = "tool_schema_invalid", f"tool {name!r}: schema cannot be applied: {j.failure}"[:300]
    elif j.message is not None:
        c.status, c.error = "schema_violation", f"{j.where}: {j.message}"[:300]
    return c


# --------------------------------------------------------------------------- argument comparison


def args_exact_equal(a: Any, b: Any) -> bool:
    """Equal after JSON parsing, types included (1 and 1.0 differ)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


_PUNCT = re.compile(r"[\s,./\-_*^'\"!?;:()\[\]{}]+")


def _norm_str(s: str) -> str:
    return _PUNCT.sub("", s).lower()


def args_bfcl_equal(a: Any, b: Any) -> bool:
    """BFCL-style equivalence: int accepted for number, strings compared without case/whitespace/punctuation.

    Booleans never equal numbers (``True`` is not ``1``); lists compare element-wise in order; objects
    must have the same keys.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, str) and isinstance(b, str):
        return _norm_str(a) == _norm_str(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(args_bfcl_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(args_bfcl_equal(a[k], b[k]) for k in a)
    return a is None and b is None


def expected_args_match(arguments: Any, expected: ExpectedCall) -> bool:
    """BFCL-style match against the suite's answer: its option lists when it has them (imported BFCL
    answers keep every acceptable value), else :func:`args_bfcl_equal` against its one ``arguments``."""
    if expected.options is not None:
        return args_match_options(arguments, expected.options)
    return args_bfcl_equal(arguments, expected.arguments)


# --------------------------------------------------------------------------- per-exchange analysis


@dataclass
class Outcome:
    """What one exchange did, in scoring terms."""

    record: ExchangeRecord
    ok: bool
    triggered: bool = False
    calls: list[CallCheck] = field(default_factory=list)

    @property
    def all_valid(self) -> bool:
        """Every judged call valid (calls of tools with an invalid schema are left out)."""
        return all(c.valid for c in self.calls if c.judged)

    @property
    def names(self) -> list[str | None]:
        return [c.name for c in self.calls]

    def parsed_args(self) -> list[Any]:
        return [c.arguments for c in self.calls]

    def describe(self) -> str:
        """Human-readable reply (untrusted model text: the report escapes it)."""
        if not self.ok:
            return f"error {self.record.error_class or self.record.status}"
        if self.calls:
            return "; ".join(c.canonical() for c in self.calls)[:EXCERPT_CHARS]
        return f"text ({self.record.finish_reason}): {(self.record.content or '')[:EXCERPT_CHARS]}"

    def signature(self) -> str:
        """Canonical outcome, for run-to-run consistency across repeats."""
        if not self.ok:
            return "error"
        return f"{self.triggered}|" + "|".join(c.canonical() for c in self.calls)


def analyse(record: ExchangeRecord, case: ToolcallCase | None) -> Outcome:
    tools = case.tools() if case is not None else {}
    out = Outcome(record=record, ok=record.ok, triggered=record.ok and record.finish_reason == "tool_calls")
    if record.ok:
        out.calls = [check_call(tc.name, tc.arguments, tools) for tc in record.tool_calls]
    return out
