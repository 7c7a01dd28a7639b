"""``verifier suites import bfcl`` on hand-written fixtures in BFCL v4's formats (tests/kinds/toolcall/fixtures/bfcl).

The fixtures hold a few entries per category, written for these tests from BFCL's documented layout:
question files, ``possible_answer/`` files, ``multi_turn_func_doc/`` and the format-sensitivity index.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from jsonschema.validators import validator_for
from typer.testing import CliRunner

from verifier.cli.suites import app
from verifier.kinds.toolcall.bfcl.importer import NO_FUNC_DOCS, convert_file
from verifier.kinds.toolcall.bfcl.options import args_match_options, standardize
from verifier.kinds.toolcall.checks import expected_args_match
from verifier.kinds.toolcall.scoring import score_toolcall
from verifier.kinds.toolcall.suite_format import ToolcallCase, load_jsonl
from verifier.records import ExchangeRecord, ToolCall

FIXTURES = Path(__file__).parent / "fixtures" / "bfcl"
QUESTION_FILES = sorted(FIXTURES.glob("BFCL_v4_*.json"))
runner = CliRunner()

#: file -> (entries, cases imported, cases with an expected answer), counted by hand from the fixtures.
EXPECTED_COUNTS = {
    "BFCL_v4_format_sensitivity.json": (1, 0, 0),
    "BFCL_v4_irrelevance.json": (1, 1, 1),
    "BFCL_v4_live_irrelevance.json": (2, 2, 2),
    "BFCL_v4_live_relevance.json": (1, 1, 0),
    "BFCL_v4_live_simple.json": (2, 2, 1),
    "BFCL_v4_memory.json": (1, 3, 0),
    "BFCL_v4_multi_turn_base.json": (1, 1, 0),
    "BFCL_v4_multi_turn_miss_func.json": (1, 1, 1),
    "BFCL_v4_multiple.json": (1, 1, 1),
    "BFCL_v4_parallel.json": (1, 1, 0),
    "BFCL_v4_simple_java.json": (2, 2, 2),
    "BFCL_v4_simple_javascript.json": (2, 2, 2),
    "BFCL_v4_simple_python.json": (3, 3, 3),
    "BFCL_v4_web_search.json": (1, 1, 0),
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, dict[str, ToolcallCase]]]:
    """Every fixture file through the CLI at once; (printed output, cases by id per file)."""
    out = tmp_path_factory.mktemp("bfcl_out")
    res = runner.invoke(app, ["import", "bfcl", *map(str, QUESTION_FILES), "--out", str(out)])
    assert res.exit_code == 0, res.output
    suites = {}
    for q in QUESTION_FILES:
        target = out / (q.stem + ".verifier.jsonl")
        suites[q.name] = {c.id: c for c in load_jsonl(target, strict=True).cases} if target.exists() else {}
    return res.output, suites


def _table_row(output: str, name: str) -> list[str]:
    line = next(ln for ln in output.splitlines() if f" {name} " in ln)
    return [cell.strip() for cell in line.strip("│ ").split("│")]


def test_every_category_converts_or_is_skipped_with_a_named_reason(imported) -> None:
    output, suites = imported
    assert {q.name for q in QUESTION_FILES} == set(EXPECTED_COUNTS)
    for name, (entries, cases, with_expected) in EXPECTED_COUNTS.items():
        row = _table_row(output, name)
        assert row[1:4] == [str(entries), str(cases), str(with_expected)], (name, row)
        assert len(suites[name]) == cases
    assert "format_sensitivity index" in _table_row(output, "BFCL_v4_format_sensitivity.json")[4]
    # every imported case without an answer is counted under a reason, and the reasons are printed
    for reason, n in [("BFCL's answer is the final text, not a call", 4), ("any call is right", 1),
                      ("several calls at once (parallel)", 1), ("judged by executing calls", 1),
                      ("lists no acceptable value for a parameter", 1)]:
        assert any(reason in ln and f"{n} cases" in ln for ln in output.splitlines()), reason
    assert "not imported: 3 later turns" in output


def test_expected_answers_validate_against_their_converted_schemas(imported) -> None:
    output, suites = imported
    failing = []
    for cases in suites.values():
        for c in cases.values():
            if c.expected is None:
                continue
            schema = c.tools()[c.expected.tool]
            if list(validator_for(schema)(schema).iter_errors(c.expected.arguments)):
                failing.append(c.id)
    # the one failure is BFCL's own data (answer "horror" outside the doc's enum ["Horror", "Comedy"])
    assert failing == ["live_simple_0-0-0"]
    assert _table_row(output, "BFCL_v4_live_simple.json")[5] == "1 (bfcl data: 1)"
    assert "converter" not in output.split("answers failing their schema")[1].split("imported without")[0]
    assert _table_row(output, "total")[5] == "1"


def test_option_lists_are_kept_and_matched_as_bfcl_does(imported) -> None:
    _, suites = imported
    book = suites["BFCL_v4_simple_python.json"]["simple_python_0"]
    assert book.expected.options["party"] == [{"size": [4], "seating": ["window", "", "near window"]}]
    assert book.expected.arguments == {"restaurant": "Luigi's", "party": {"size": 4, "seating": "window"},
                                       "time": "19:00"}
    ok = [
        {"restaurant": "luigis", "party": {"size": 4}, "time": "7PM"},  # nested key may be omitted ("" listed)
        {"restaurant": "Luigi's", "party": {"size": 4.0, "seating": "Near window"}, "time": "19:00"},
    ]
    bad = [
        {"restaurant": "Luigi's", "party": {"size": 5}, "time": "19:00"},  # value not listed
        {"restaurant": "Luigi's", "party": {"size": 4, "floor": 2}, "time": "19:00"},  # key not in the answer
        {"restaurant": "Luigi's", "party": {"size": 4}},  # "time" has no "" option
        {"restaurant": "Luigi's", "party": {"size": True}, "time": "19:00"},  # a boolean is not a number
    ]
    assert all(expected_args_match(a, book.expected) for a in ok)
    assert not any(expected_args_match(a, book.expected) for a in bad)
    circle = suites["BFCL_v4_simple_python.json"]["simple_python_1"]
    assert circle.expected.arguments == {"radius": 3.0}  # "" listed first: omitted in the canonical call
    assert expected_args_match({"radius": 3, "unit": "square meters"}, circle.expected)
    assert not expected_args_match({"radius": 3, "origin": [0.0, 0.0]}, circle.expected)  # only "" listed
    tags = suites["BFCL_v4_simple_python.json"]["simple_python_2"]
    assert expected_args_match({"key": "answer", "value": "42", "tags": [{"name": "Math"}]}, tags.expected)
    assert not expected_args_match({"key": "answer", "value": "42", "tags": [{"name": "x"}]}, tags.expected)
    multiple = suites["BFCL_v4_multiple.json"]["multiple_0"]
    assert multiple.expected.tool == "triangle_props" and multiple.expected.arguments == {"a": 5, "b": 4, "c": 3}
    assert expected_args_match({"a": 5, "b": 4, "c": 3, "area": True}, multiple.expected)
    assert not expected_args_match({"a": 5, "b": 4, "c": 3, "area": False}, multiple.expected)


def test_scorer_counts_a_second_option_as_correct(imported) -> None:
    """End to end through score_toolcall: a reply using a later BFCL option is a correct case."""
    _, suites = imported
    book = suites["BFCL_v4_simple_python.json"]["simple_python_0"]

    def rec(endpoint: str, args: dict) -> ExchangeRecord:
        return ExchangeRecord(request_hash="h", kind="toolcall", suite="s", case_id=book.id, endpoint=endpoint,
                              status=200, attempts=1, latency_s=1.0, finish_reason="tool_calls",
                              tool_calls=[ToolCall(index=0, id="c", name="restaurant_book",
                                                   arguments=json.dumps(args))])

    good = {"restaurant": "Luigis", "party": {"size": 4, "seating": "near window"}, "time": "7pm"}
    wrong = {"restaurant": "Luigis", "party": {"size": 3}, "time": "7pm"}
    results = {r.endpoint: r for r in score_toolcall("s", [book], [rec("ref", good), rec("cand", wrong)],
                                                      "ref", ["ref", "cand"])}
    assert results["ref"].metrics["expected_case_accuracy"].value == 1.0
    assert results["ref"].metrics["expected_args_bfcl"].value == 1.0
    assert results["cand"].metrics["expected_case_accuracy"].value == 0.0


def test_java_and_javascript_parameters_are_strings_as_bfcl_types_them(imported) -> None:
    _, suites = imported
    java = suites["BFCL_v4_simple_java.json"]
    upd = java["simple_java_0"]
    props = upd.tools()["ProductService_updateStatus"]["properties"]
    assert {p["type"] for p in props.values()} == {"string"}
    assert "items" not in props["ids"] and "This is Java ArrayList type parameter in string representation." in \
        props["ids"]["description"] and "elements are of type long" in props["ids"]["description"]
    assert "Java 8 SDK syntax" in upd.body["tools"][0]["function"]["description"]
    # element types as BFCL's Java converter reads them: long elements need their L
    assert upd.expected.arguments == {"ids": "new ArrayList<>(Arrays.asList(7L, 9L))", "notify": "true",
                                      "batchSize": "500L"}
    assert upd.expected.options["ratio"] == ["", "1.0", "1"]
    assert expected_args_match({"ids": "new ArrayList<>(Arrays.asList(7L,9L))", "notify": "true", "batchSize": "500l"},
                               upd.expected)
    assert not expected_args_match({"ids": "new ArrayList<>(Arrays.asList(7L, 9L))", "notify": True,
                                    "batchSize": "500L"}, upd.expected)  # a JSON boolean is not Java source text
    run = java["simple_java_1"]
    assert run.expected.arguments["args"] == "new String[]{-v, -q}"  # BFCL keeps quotes of Array<String> elements
    assert run.expected.arguments["settings"] == ('new HashMap<String, Object>() '
                                                  '{{ put("limit", 50); put("schema", "public"); }}')
    assert "any type of Java object" in run.tools()["Report_run"]["properties"]["monitor"]["description"]
    js = suites["BFCL_v4_simple_javascript.json"]
    tok = js["simple_javascript_0"]
    props = tok.tools()["createToken"]["properties"]
    assert {p["type"] for p in props.values()} == {"string"}
    # the dict's properties (one with BFCL's empty type "") move into the description, as BFCL does
    assert "properties" not in props["options"] and '"issuer": {"type": ""' in props["options"]["description"]
    assert tok.expected.arguments == {"userId": "12n", "options": '{issuer: "acme", expiresIn: 3600}',
                                      "complete": "true"}
    assert expected_args_match({"userId": "12n", "options": '{"issuer": "acme", "expiresIn": 3600}',
                                "complete": "true", "weight": "2"}, tok.expected)
    click = js["simple_javascript_1"]
    assert expected_args_match({"formId": "'loginForm'", "coordinates": "[60,30]"}, click.expected)
    assert not expected_args_match({"formId": "loginForm", "coordinates": "[30, 60]"}, click.expected)


def test_any_and_empty_types_map_to_string_as_bfcl_maps_them(imported) -> None:
    _, suites = imported
    log = suites["BFCL_v4_simple_python.json"]["simple_python_2"].tools()["log_value"]
    assert log["properties"]["value"]["type"] == "string"
    circle = suites["BFCL_v4_simple_python.json"]["simple_python_1"].tools()["circle_area"]
    assert circle["properties"]["radius"]["type"] == "number" and circle["properties"]["radius"]["format"] == "float"
    assert circle["properties"]["origin"] == {"type": "array", "items": {"type": "number"},
                                              "description": "Centre (x, y)."}
    simple = suites["BFCL_v4_simple_python.json"]["simple_python_2"]
    assert "Python 3 syntax" in simple.body["tools"][0]["function"]["description"]
    no_tools = suites["BFCL_v4_live_irrelevance.json"]["live_irrelevance_0-0-0"]
    assert "tools" not in no_tools.body and no_tools.has_expected and no_tools.expected is None


def test_func_docs_import_multi_turn_memory_and_web_search(imported, tmp_path: Path) -> None:
    _, suites = imported
    base = suites["BFCL_v4_multi_turn_base.json"]["multi_turn_base_0"]
    assert sorted(base.tools()) == ["cd", "ls", "mkdir", "post_tweet"]
    assert [m["content"] for m in base.body["messages"]] == ["Make a folder named temp here."]
    assert "bfcl:first_turn_of:2" in base.tags and not base.has_expected
    miss = suites["BFCL_v4_multi_turn_miss_func.json"]["multi_turn_miss_func_0"]
    assert sorted(miss.tools()) == ["cd", "mkdir"]  # "ls" is held out, as BFCL holds it out
    assert miss.has_expected and miss.expected is None  # BFCL's answer for turn 0 is no call
    memory = suites["BFCL_v4_memory.json"]
    assert sorted(memory) == ["memory_kv_0-student-0", "memory_rec_sum_0-student-0", "memory_vector_0-student-0"]
    vector = memory["memory_vector_0-student-0"]
    assert "Search the vector memory." in vector.body["tools"][0]["function"]["description"]
    web = suites["BFCL_v4_web_search.json"]["web_search_0"]
    assert sorted(web.tools()) == ["fetch_url_content", "search_engine_query"] and not web.has_expected
    # without function docs (no --func-docs, none beside the file) the entries are skipped with the reason
    lone = tmp_path / "BFCL_v4_multi_turn_base.json"
    shutil.copy(FIXTURES / lone.name, lone)
    result = convert_file(lone)
    assert result.lines == [] and result.skipped == {NO_FUNC_DOCS: 1}
    res = runner.invoke(app, ["import", "bfcl", str(lone), "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and NO_FUNC_DOCS in res.output and "no convertible entries" in res.output
    res = runner.invoke(app, ["import", "bfcl", str(lone), "--func-docs", str(FIXTURES / "multi_turn_func_doc"),
                              "--answers", str(FIXTURES / "possible_answer"), "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 0, res.output
    assert [c.id for c in load_jsonl(tmp_path / "o.jsonl", strict=True).cases] == ["multi_turn_base_0"]


def test_bad_files_give_one_line_errors_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    res = runner.invoke(app, ["import", "bfcl", str(missing)])
    assert res.exit_code == 2 and f"error: {missing}: BFCL question file not found" in res.output
    q = tmp_path / "BFCL_v4_simple_python.json"
    shutil.copy(FIXTURES / q.name, q)
    bad_answers = tmp_path / "answers.json"
    bad_answers.write_text('{"id": "simple_python_0", "ground_truth": []}\n{oops\n')
    res = runner.invoke(app, ["import", "bfcl", str(q), "--answers", str(bad_answers)])
    assert res.exit_code == 2 and f"error: {bad_answers}:2: not JSON" in res.output
    assert not (tmp_path / "BFCL_v4_simple_python.verifier.jsonl").exists()
    res = runner.invoke(app, ["import", "bfcl", str(q), "--func-docs", str(tmp_path / "no_docs")])
    assert res.exit_code == 2 and f"{tmp_path / 'no_docs'}: --func-docs folder not found" in res.output
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "gorilla_file_system.json").write_text('{"name": "ls", "parameters": {}}\nnot json\n')
    (docs / "posting_api.json").write_text('{"name": "post_tweet"}\n')
    mt = tmp_path / "BFCL_v4_multi_turn_base.json"
    shutil.copy(FIXTURES / mt.name, mt)
    res = runner.invoke(app, ["import", "bfcl", str(mt), "--func-docs", str(docs)])
    assert res.exit_code == 2 and f"{docs / 'gorilla_file_system.json'}:2: not JSON" in res.output
    assert len([ln for ln in res.output.splitlines() if ln.startswith("error:")]) == 1


def test_bad_entries_are_named_by_file_line_and_id(tmp_path: Path) -> None:
    q = tmp_path / "BFCL_v4_simple_python.json"
    good = (FIXTURES / q.name).read_text().splitlines()
    bad = json.dumps({"id": "simple_python_9", "question": "x",
                      "function": [{"name": "f",
                                    "parameters": {"type": "dict", "properties": {"a": {"type": "quaternion"}}}}]})
    q.write_text("\n".join(good + ["{broken", bad]) + "\n")
    res = runner.invoke(app, ["import", "bfcl", str(q), "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 0, res.output
    assert f"skipped: {q}:4: not JSON" in res.output
    assert (f"skipped: {q}:5: function[0].parameters.properties.a.type: unknown BFCL type 'quaternion' "
            f"(id simple_python_9)") in res.output
    strict = runner.invoke(app, ["import", "bfcl", str(q), "--strict", "--out", str(tmp_path / "o2.jsonl")])
    assert strict.exit_code == 2 and f"{q}:4: not JSON" in strict.output and not (tmp_path / "o2.jsonl").exists()


def test_standardize_is_bfcls_rule() -> None:
    assert standardize("April 1, 2024") == standardize("april 1 2024") == "april12024"
    assert standardize("it's") == 'it"s' and standardize("a_b-c/d.e*f^g") == "abcdefg"
    assert standardize("(x)") == "(x)"  # brackets are not BFCL's punctuation
    assert args_match_options({}, {"a": [""]}) and not args_match_options({}, {"a": [1]})
