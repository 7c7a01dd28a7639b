"""The memo of argument validation (``tool_schemas.first_error``) gives what a fresh validation gives.

Why a test: scoring validates every call twice (our rule and K2VV's) and replies repeat the same argument texts, so
the outcome is memoised by (schema, format checker, text). A memo that mixed up format checkers or dropped the
validator's own failures would change figures silently.
"""

from __future__ import annotations

from verifier.kinds.toolcall import k2vv_rule, tool_schemas
from verifier.kinds.toolcall.checks import check_call

DATE_TOOL = {"type": "object", "properties": {"day": {"type": "string", "format": "date"}}, "required": ["day"]}
REF_TOOL = {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}
TOOLS = [{"type": "function", "function": {"name": "plan", "parameters": DATE_TOOL}},
         {"type": "function", "function": {"name": "ref", "parameters": REF_TOOL}}]


def _fresh(name: str, text: str) -> tuple[str, str | None]:
    tool_schemas._JUDGED.clear()
    c = check_call(name, text, {"plan": DATE_TOOL, "ref": REF_TOOL})
    return c.status, c.error


def test_memoised_outcomes_equal_fresh_ones_per_format_checker() -> None:
    texts = [("plan", '{"day": "2024-02-30"}'), ("plan", '{"day": "2024-02-03"}'), ("plan", '{}'),
             ("plan", '{"day": 3}'), ("ref", '{"x": 1}')]
    fresh = {t: _fresh(*t) for t in texts}
    fresh_k2 = {}
    for t in texts:
        tool_schemas._JUDGED.clear()
        fresh_k2[t] = k2vv_rule.call_valid(t[0], t[1], TOOLS)
    tool_schemas._JUDGED.clear()
    for _ in range(2):  # the second pass reads every outcome from the memo
        for name, text in texts:
            c = check_call(name, text, {"plan": DATE_TOOL, "ref": REF_TOOL})
            assert (c.status, c.error) == fresh[(name, text)]
            assert k2vv_rule.call_valid(name, text, TOOLS) == fresh_k2[(name, text)]
    # our rule checks formats, K2VV's does not: the same text is invalid for one and valid for the other
    assert fresh[("plan", '{"day": "2024-02-30"}')][0] == "schema_violation"
    assert fresh_k2[("plan", '{"day": "2024-02-30"}')] is True
    assert fresh[("ref", '{"x": 1}')][0] == "tool_schema_invalid"  # the validator's own failure is kept too
    assert fresh_k2[("ref", '{"x": 1}')] is False
    assert len(tool_schemas._JUDGED) == 2 * len(texts)


def test_a_new_schema_object_with_other_content_is_not_confused_with_an_old_one() -> None:
    a = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert check_call("f", '{"n": "x"}', {"f": a}).status == "schema_violation"
    b = {"type": "object", "properties": {"n": {"type": "string"}}}
    assert check_call("f", '{"n": "x"}', {"f": b}).status == "valid"
