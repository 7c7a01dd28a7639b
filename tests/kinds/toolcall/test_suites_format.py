"""Suite files: K2VV compatibility, file:line errors, strict vs lenient, manifest hashes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifier.kinds.toolcall.suite_format import SuiteLineError, load_jsonl

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _line(**kw: object) -> str:
    body = {"messages": [{"role": "user", "content": "weather in Oslo?"}], "tools": [TOOL]}
    body.update(kw)
    return json.dumps(body)


def _write(tmp_path: Path, lines: list[str], name: str = "s.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_k2vv_line_runs_unchanged(tmp_path: Path) -> None:
    k2vv = json.dumps({"model": "kimi-k2", "stream": True, "temperature": 0.6,
                       "messages": [{"role": "_input", "content": "sys"}, {"role": "user", "content": "hi"}],
                       "tools": [TOOL]})
    suite = load_jsonl(_write(tmp_path, [k2vv]), strict=True)
    (case,) = suite.cases
    assert case.body["messages"][0]["role"] == "system"
    assert "model" not in case.body and "stream" not in case.body
    assert case.body["temperature"] == 0.6
    assert case.stream is True
    assert case.id.startswith("L1-") and not case.has_expected
    assert case.tools() == {"get_weather": TOOL["function"]["parameters"]}


def test_meta_expected_null_differs_from_absent(tmp_path: Path) -> None:
    lines = [
        _line(_meta={"id": "a", "tags": ["x"], "expected": None}),
        _line(_meta={"id": "b", "expected": {"tool": "get_weather", "arguments": {"city": "Oslo"}}}),
        _line(_meta={"id": "c"}),
    ]
    a, b, c = load_jsonl(_write(tmp_path, lines), strict=True).cases
    assert a.has_expected and a.expected is None and a.tags == ["x"]
    assert b.expected is not None and b.expected.arguments == {"city": "Oslo"}
    assert not c.has_expected


BAD = [
    ("{not json", "not JSON"),
    ("[1, 2]", "not an object"),
    (json.dumps({"prompt": "x"}), "missing 'messages'"),
    (json.dumps({"messages": [{"role": "robot", "content": "x"}]}), "messages[0].role 'robot'"),
    (json.dumps({"messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}}), "'tools' must be a list"),
    (_line(tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice forces 'nope'"),
    (_line(_meta={"expected": {"tool": "other", "arguments": {}}}), "_meta.expected.tool 'other'"),
    (json.dumps({"messages": [{"role": "user", "content": "x"}], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]}),
     "tools[0].function.parameters is not a valid JSON Schema"),
]


@pytest.mark.parametrize("bad, needle", BAD)
def test_bad_line_strict_names_file_and_line(tmp_path: Path, bad: str, needle: str) -> None:
    p = _write(tmp_path, [_line(), bad, _line()])
    with pytest.raises(SuiteLineError) as err:
        load_jsonl(p, strict=True)
    msg = str(err.value)
    assert msg.startswith(f"{p}:2: ") and needle in msg and "\n" not in msg


def test_lenient_load_skips_and_counts(tmp_path: Path) -> None:
    lines = [_line(_meta={"id": "ok1"}), "{oops", "", _line(_meta={"id": "ok1"}), _line(_meta={"id": "ok2"})]
    suite = load_jsonl(_write(tmp_path, lines))
    assert [c.id for c in suite.cases] == ["ok1", "ok2"]
    assert [(p.line, p.message.split(":")[0]) for p in suite.problems] == [(2, "not JSON"),
                                                                           (4, "duplicate _meta.id 'ok1'")]
    assert suite.manifest.skipped_lines == 2 and suite.manifest.case_count == 2


def test_manifest_hash_is_stable_and_content_addressed(tmp_path: Path) -> None:
    a = load_jsonl(_write(tmp_path, [_line(_meta={"id": "x"})], "a.jsonl"))
    # same content, different key order and whitespace -> same hash
    reordered = json.dumps({"_meta": {"id": "x"}, "tools": [TOOL],
                            "messages": [{"content": "weather in Oslo?", "role": "user"}]},
                           indent=None, separators=(", ", ": "))
    b = load_jsonl(_write(tmp_path, [reordered], "b.jsonl"))
    c = load_jsonl(_write(tmp_path, [_line(_meta={"id": "x"}, temperature=0)], "c.jsonl"))
    assert a.manifest.content_hash == b.manifest.content_hash
    assert a.manifest.content_hash != c.manifest.content_hash
    assert len(a.manifest.content_hash) == 64 and a.manifest.kind == "toolcall"


def test_missing_file_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(SuiteLineError, match="suite file not found"):
        load_jsonl(tmp_path / "nope.jsonl")


def test_role_function_passes_through_unchanged(tmp_path: Path) -> None:
    """OpenAI's legacy ``function`` role (a function result) is sent exactly as written: key order included."""
    messages = [{"role": "user", "content": "weather in Oslo?"},
                {"role": "assistant", "content": None,
                 "function_call": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
                {"role": "function", "name": "get_weather", "content": "{\"temp_c\": 4}"},
                {"content": "and tomorrow?", "role": "user"}]
    line = json.dumps({"messages": messages, "tools": [TOOL], "_meta": {"id": "fn"}})
    (case,) = load_jsonl(_write(tmp_path, [line]), strict=True).cases
    assert case.body["messages"] == messages
    assert json.dumps(case.body["messages"]) == json.dumps(messages)  # same keys in the same order


def test_invalid_tool_schema_is_kept_and_listed_as_sent(tmp_path: Path) -> None:
    bad = {"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}
    text = json.dumps({"type": "function", "function": {"name": "g", "parameters": "a string"}})
    line = json.dumps({"messages": [{"role": "user", "content": "x"}], "tools": [TOOL, bad, json.loads(text)]})
    suite = load_jsonl(_write(tmp_path, [_line(), line]))
    assert len(suite.cases) == 2 and suite.manifest.skipped_lines == 0
    case = suite.cases[1]
    assert case.body["tools"][1] == bad and case.body["tools"][2]["function"]["parameters"] == "a string"
    assert sorted(case.schema_problems) == ["f", "g"]
    assert [(p.line, p.action) for p in suite.problems] == [(2, "sent"), (2, "sent")]
    assert suite.problems[0].message.startswith("tools[1].function.parameters is not a valid JSON Schema: ")
    assert "not str" in suite.problems[1].message and "\n" not in suite.problems[1].message


def test_parse_case_alone_still_rejects_a_bad_schema() -> None:
    """Converters (the BFCL import) call parse_case to check their output: a bad schema must stay an error there."""
    from verifier.kinds.toolcall.suite_format import parse_case

    bad = {"messages": [{"role": "user", "content": "x"}],
           "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]}
    with pytest.raises(SuiteLineError, match=r"^conv:7: tools\[0\]\.function\.parameters is not a valid JSON Schema"):
        parse_case(bad, "conv", 7, default_id="x")
    assert list(parse_case(bad, "conv", 7, default_id="x", keep_bad_schemas=True).schema_problems) == ["f"]


def test_schema_draft_comes_from_dollar_schema(tmp_path: Path) -> None:
    """draft-04's boolean exclusiveMinimum is valid under draft-04 and invalid under the 2020-12 default."""
    props = {"n": {"type": "integer", "minimum": 0, "exclusiveMinimum": True}}
    d4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "properties": props}
    lines = [json.dumps({"messages": [{"role": "user", "content": "x"}],
                         "tools": [{"type": "function", "function": {"name": "c", "parameters": p}}]})
             for p in (d4, {"type": "object", "properties": props})]
    a, b = load_jsonl(_write(tmp_path, lines)).cases
    assert a.schema_problems == {} and list(b.schema_problems) == ["c"]


def test_tool_name_offered_twice_is_sent_and_the_first_counts(tmp_path: Path) -> None:
    """K2VV sends such lines (and validates against the first tool of the name): so do we, listing the line."""
    other = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"town": {"type": "integer"}}}}}
    broken_second = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "objekt"}}}
    suite = load_jsonl(_write(tmp_path, [_line(), _line(tools=[TOOL, other]), _line(tools=[TOOL, broken_second])]))
    assert len(suite.cases) == 3 and suite.manifest.skipped_lines == 0
    case = suite.cases[1]
    assert case.body["tools"] == [TOOL, other]  # as written
    assert case.tools()["get_weather"] == TOOL["function"]["parameters"]  # the first one
    assert case.duplicate_tools == {"get_weather": "tools[1].function.name 'get_weather' is offered twice"}
    # a bad schema on the ignored second tool is not the name's problem: only the first is ever validated against
    assert suite.cases[2].schema_problems == {} and list(suite.cases[2].duplicate_tools) == ["get_weather"]
    assert [(p.line, p.action) for p in suite.problems] == [(2, "sent"), (3, "sent")]
    assert "first tool of that name" in suite.problems[0].message and "\n" not in suite.problems[0].message
    with pytest.raises(SuiteLineError, match=r":2: tools\[1\]\.function\.name 'get_weather' is offered twice"):
        load_jsonl(_write(tmp_path, [_line(), _line(tools=[TOOL, other])], name="strict.jsonl"), strict=True)
