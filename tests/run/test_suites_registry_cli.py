"""Suite registry resolution, ``verifier suites list`` and ``verifier suites import bfcl``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli.suites import app
from verifier.kinds.toolcall.suite_format import load_jsonl
from verifier.run import registry as suite_registry

runner = CliRunner()


def test_resolve_builtins_prefixes_kind_paths_and_files(tmp_path: Path) -> None:
    assert suite_registry.resolve("toolcall-core").kind == "toolcall"
    assert suite_registry.resolve("agent-smoke").kind == "agent"
    assert suite_registry.resolve("logprob-short").kind == "logprob"
    assert suite_registry.resolve("cache-sessions").kind == "cache"
    assert suite_registry.resolve("agent:my.jsonl") == suite_registry.SuiteRef("my", "agent", "my.jsonl")
    f = tmp_path / "mine.jsonl"
    f.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    ref = suite_registry.resolve(str(f))
    assert (ref.kind, ref.name) == ("toolcall", "mine")
    kind, suite = suite_registry.load_suite(str(f))
    assert kind.kind == "toolcall" and suite.manifest.name == "mine" and suite.manifest.case_count == 1


def test_unknown_suite_and_unknown_kind_are_one_line_errors() -> None:
    with pytest.raises(suite_registry.SuiteResolutionError, match="not a built-in suite") as err:
        suite_registry.resolve("no-such-suite")
    assert "\n" not in str(err.value)
    with pytest.raises(suite_registry.SuiteResolutionError, match="unknown suite kind 'nope'") as err:
        suite_registry.get_kind("nope")
    assert "\n" not in str(err.value) and "toolcall" in str(err.value)


def test_builtin_manifest_is_stable_across_loads() -> None:
    _, a = suite_registry.load_suite("toolcall-schemas")
    _, b = suite_registry.load_suite("toolcall-schemas")
    assert a.manifest == b.manifest and a.manifest.source == "builtin:toolcall-schemas"
    _, limited = suite_registry.load_suite("toolcall-schemas", {"limit": 5})
    assert limited.manifest.case_count == 5 and limited.manifest.content_hash != a.manifest.content_hash


@pytest.mark.slow
def test_list_command_shows_builtins() -> None:
    res = runner.invoke(app, ["list", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.output)}
    assert rows["toolcall-core"]["cases"] == 1200 and len(rows["toolcall-core"]["content_hash"]) == 64
    assert rows["toolcall-schemas"]["kind"] == "toolcall"
    assert {"agent-smoke", "agent-long"} <= set(rows)


BFCL_QUESTIONS = [
    {"id": "simple_0", "question": [[{"role": "user", "content": "Area of a triangle with base 10 and height 5?"}]],
     "function": [{"name": "geometry.triangle_area", "description": "Triangle area.", "parameters": {
         "type": "dict", "properties": {"base": {"type": "integer", "description": "b"}, "height": {"type": "float"},
                                        "unit": {"type": "string", "optional": True},
                                        "dims": {"type": "tuple", "items": {"type": "float"}},
                                        "meta": {"type": "any"}},
         "required": ["base", "height"]}}]},
    {"id": "irrelevance_3", "question": [[{"role": "user", "content": "Tell me a joke"}]],
     "function": {"name": "calc", "parameters": {"type": "dict", "properties": {"x": {"type": "integer"}}}}},
    {"id": "multi_turn_base_1",
     "question": [[{"role": "user", "content": "first"}], [{"role": "user", "content": "second"}]],
     "function": [{"name": "ls", "parameters": {"type": "dict", "properties": {}}}]},
]
BFCL_ANSWERS = [{"id": "simple_0",
                 "ground_truth": [{"geometry.triangle_area": {"base": [10], "height": [5.0, 5], "unit": ["", "cm"]}}]}]


def _bfcl_files(tmp_path: Path, extra_lines: list[str] = ()) -> tuple[Path, Path]:
    q = tmp_path / "BFCL_v3_simple.json"
    q.write_text("\n".join([json.dumps(x) for x in BFCL_QUESTIONS] + list(extra_lines)) + "\n")
    a = tmp_path / "answers.json"
    a.write_text("\n".join(json.dumps(x) for x in BFCL_ANSWERS) + "\n")
    return q, a


def test_import_bfcl_converts_dialect_and_answers(tmp_path: Path) -> None:
    q, a = _bfcl_files(tmp_path)
    out = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["import", "bfcl", str(q), "--out", str(out), "--answers", str(a)])
    assert res.exit_code == 0, res.output
    assert "3 cases (2 with expected answers, 0 entries skipped)" in res.output
    suite = load_jsonl(out, strict=True)
    simple, irrelevant, multi = suite.cases
    params = simple.tools()["geometry_triangle_area"]
    assert params["type"] == "object"
    assert params["properties"]["height"]["type"] == "number" and params["properties"]["height"]["format"] == "float"
    assert params["properties"]["dims"] == {"type": "array", "items": {"type": "number"}}
    assert params["properties"]["meta"]["type"] == "string"  # BFCL maps `any` to string
    assert simple.expected.tool == "geometry_triangle_area" and simple.expected.arguments == {"base": 10, "height": 5.0}
    assert "bfcl:simple" in simple.tags
    assert irrelevant.has_expected and irrelevant.expected is None
    assert "bfcl:first_turn_of:2" in multi.tags and multi.body["messages"][-1]["content"] == "first"


def test_import_bfcl_bad_entries_name_file_line(tmp_path: Path) -> None:
    q, _ = _bfcl_files(tmp_path, ["{broken", json.dumps({"id": "simple_9", "question": "x",
                                                            "function": [{"name": "f",
                                                                          "parameters": {"type": "quaternion"}}]})])
    res = runner.invoke(app, ["import", "bfcl", str(q), "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 0
    assert f"{q}:4: not JSON" in res.output
    assert f"{q}:5: function[0].parameters.type: unknown BFCL type 'quaternion'" in res.output
    strict = runner.invoke(app, ["import", "bfcl", str(q), "--strict", "--out", str(tmp_path / "o2.jsonl")])
    assert strict.exit_code == 2 and f"{q}:4:" in strict.output and not (tmp_path / "o2.jsonl").exists()


@pytest.mark.slow
def test_run_options_limit_variants_stream() -> None:
    _, both = suite_registry.load_suite("toolcall-schemas", {"limit": 3})
    assert both.variants == ("nonstream", "stream")
    _, forced = suite_registry.load_suite("toolcall-schemas", {"limit": 3, "stream": False})
    assert forced.variants == ("nonstream",)
    _, core = suite_registry.load_suite("toolcall-core", {"limit": 3, "stream": True, "variants": "both"})
    assert core.variants == ("nonstream", "stream") and core.stream_override is True
    with pytest.raises(ValueError, match="option limit"):
        suite_registry.load_suite("toolcall-core", {"limit": "many"})
    with pytest.raises(ValueError, match="option variants"):
        suite_registry.load_suite("toolcall-core", {"variants": "sideways"})


@pytest.mark.slow
def test_toolcall_smoke_is_a_named_hashed_subset_and_the_embedded_default_covers_every_kind() -> None:
    from verifier.run.loading import default_suites
    from verifier.run.registry import load_suite, resolve

    _, smoke = load_suite("toolcall-smoke", {})
    _, core = load_suite("toolcall-core", {})
    assert smoke.manifest.case_count == 100 and len(smoke.cases) == 100
    assert smoke.manifest.content_hash != core.manifest.content_hash
    assert [c.id for c in smoke.cases] == [c.id for c in core.cases[:100]]
    _, smaller = load_suite("toolcall-smoke", {"limit": 7})
    assert len(smaller.cases) == 7
    kinds = {resolve(name).kind for name in default_suites(embedded=True)}
    assert kinds == {"toolcall", "agent", "logprob", "cache"}
    assert default_suites() == ["toolcall-core"]


def test_no_flags_picks_the_embedded_default_and_a_url_picks_the_remote_default() -> None:
    """Regression: the CLI builds the built-in endpoint set itself, so the runner must recognise it by source."""
    from verifier.http.endpoints import from_flags
    from verifier.run.loading import default_suites, suites_to_run

    embedded = suites_to_run([], from_flags(None, []))
    assert embedded == default_suites(embedded=True) and "agent-smoke" in embedded
    remote = suites_to_run([], from_flags("http://127.0.0.1:9/v1", []))
    assert remote == default_suites()
    assert suites_to_run(["cache-smoke"], from_flags(None, [])) == ["cache-smoke"]
