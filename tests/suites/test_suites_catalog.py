"""The tool catalogue and the committed built-in suites."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from jsonschema.validators import validator_for

from suites.toolcall import catalog, generate
from training.phrasings import TRAIN_PHRASINGS
from verifier.kinds.toolcall.checks import FORMAT_CHECKER
from verifier.kinds.toolcall.suite_format import case_to_line, load_jsonl


def test_catalogue_is_large_and_schemas_are_valid() -> None:
    assert len(catalog.TOOLS) >= 40
    assert len({t.name for t in catalog.TOOLS}) == len(catalog.TOOLS)
    for t in catalog.TOOLS:
        validator_for(t.parameters).check_schema(t.parameters)


@pytest.mark.parametrize("phrasings", [catalog.EVAL_PHRASINGS, TRAIN_PHRASINGS], ids=["eval", "train"])
def test_sampled_arguments_validate_and_phrasings_carry_values(phrasings: catalog.Phrasings) -> None:
    for t in catalog.TOOLS:
        v = validator_for(t.parameters)(t.parameters, format_checker=FORMAT_CHECKER)
        for seed in range(25):
            rng = random.Random(seed)
            args = t.sample(rng)
            assert not list(v.iter_errors(args)), (t.name, args)
            text = t.phrase(args, rng, phrasings)
            for k, val in args.items():
                if k in t.render or isinstance(val, (dict, list, bool)) or val is None:
                    continue
                said = str(int(val)) if isinstance(val, float) and val.is_integer() else str(val)
                if isinstance(val, float) and k in ("amount",):
                    said = f"{val:.2f}"
                assert said.lower() in text.lower(), (t.name, k, val, text)


def test_eval_and_train_phrasings_never_overlap() -> None:
    ev, tr = catalog.EVAL_PHRASINGS, TRAIN_PHRASINGS
    for t in catalog.TOOLS:
        assert not set(ev.tools[t.name].templates) & set(tr.tools[t.name].templates), t.name
        for arg, clauses in ev.tools[t.name].clauses.items():
            assert not set(clauses) & set(tr.tools[t.name].clauses[arg]), (t.name, arg)
    assert not set(ev.no_tool_requests) & set(tr.no_tool_requests)
    eval_texts = {b["messages"][-1]["content"] for b, _ in catalog.generate_cases(1, 300, ev)}
    train_texts = {b["messages"][-1]["content"] for b, _ in catalog.generate_cases(1, 300, tr)}
    assert not eval_texts & train_texts


def test_generation_is_reproducible_and_seed_dependent() -> None:
    assert catalog.generate_cases(7, 50) == catalog.generate_cases(7, 50)
    assert catalog.generate_cases(7, 50) != catalog.generate_cases(8, 50)


def test_committed_data_is_up_to_date() -> None:
    assert generate.main(["--check"]) == 0


def test_generator_writes_the_lines_the_suite_format_writes() -> None:
    """``suites/`` serialises its own lines (it does not import ``verifier``); they must stay the same bytes."""
    for body, meta in catalog.generate_cases(5, 40) + catalog.generate_forced_cases(5, 1):
        assert generate.case_to_line(body, meta) == case_to_line(body, meta)


def test_a_broken_catalogue_file_names_the_file_and_field(tmp_path) -> None:
    bad = tmp_path / "phrasings.json"
    bad.write_text('{"name": "eval", "tools": {}, "wrappers": [], "no_tool_requests": ["hi"], '
                   '"system_prompts": ["s"], "acks": ["ok"]}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"phrasings\.json: wrappers: "):
        catalog.load_phrasings(bad)
    bad.write_text('{"name": "eval", "tools": {}, "wrappers": ["{t}"], "no_tool_requests": ["hi"], '
                   '"system_prompts": ["s"], "acks": ["ok"]}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"phrasings\.json: tools: must word exactly the catalogue's tools"):
        catalog.load_phrasings(bad)
    bad.write_text('{"domain_groups": {}, "tools": [{"name": "x y", "domain": "d", "description": "", '
                   '"parameters": {}}]}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"phrasings\.json: tools\.0\.name: "):
        catalog.load_tools(bad)
    bad.write_text('{"domain_groups": {}, "tools": [\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"phrasings\.json: line 2: not JSON"):
        catalog.load_tools(bad)


def test_toolcall_core_shape() -> None:
    suite = load_jsonl(generate.DATA_DIR / "toolcall-core.jsonl", strict=True)
    cases = suite.cases
    assert len(cases) >= 1000
    no_tool = [c for c in cases if c.expected is None]
    assert all(c.has_expected for c in cases)
    assert len(no_tool) / len(cases) >= 0.25
    n_tools = Counter(len(c.body["tools"]) for c in cases)
    assert set(n_tools) == {1, 2, 3, 4, 5, 6}
    followups = [c for c in cases if "followup" in c.tags]
    assert 0.1 <= len(followups) / len(cases) <= 0.2
    for c in followups:  # history: user, assistant tool call, tool result with the same id, assistant, user
        roles = [m["role"] for m in c.body["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
        call = c.body["messages"][2]["tool_calls"][0]
        assert c.body["messages"][3]["tool_call_id"] == call["id"] and call["function"]["name"] in c.tools()
    called = Counter(c.expected.tool for c in cases if c.expected)
    assert len(called) == len(catalog.TOOLS)  # every tool is asked for
    for c in cases:
        if c.expected:
            schema = c.tools()[c.expected.tool]
            assert not list(validator_for(schema)(schema,
                                                  format_checker=FORMAT_CHECKER).iter_errors(c.expected.arguments))


def test_toolcall_schemas_shape() -> None:
    suite = load_jsonl(generate.DATA_DIR / "toolcall-schemas.jsonl", strict=True)
    assert all(c.forced_tool() == c.expected.tool for c in suite.cases if c.expected)
    features = {t for c in suite.cases for t in c.tags if t.startswith("feature:")}
    for needed in ("nested_object", "array", "enum", "numeric_bounds", "optional_fields", "pattern", "format:date",
                   "format:email", "oneOf", "anyOf", "$ref", "nullable", "const", "tuple", "map", "multipleOf"):
        assert f"feature:{needed}" in features, needed


def test_schema_features_detects_nesting() -> None:
    schema = {"type": "object",
              "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer", "minimum": 0}},
                                                     "required": ["b"]}, "c": {"type": ["string",
                                                                                        "null"]}}, "required": ["a"]}
    assert catalog.schema_features(schema) == ["integer", "nested_object", "nullable", "numeric_bounds",
                                               "optional_fields",
                                               "string"]
