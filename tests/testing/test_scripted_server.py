"""The scripted server's stand-in model answers with schema-valid arguments, so injected faults are the only faults."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from verifier.testing.responders import _instance, _regex_example

DATA = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data"


@pytest.mark.slow
def test_instances_validate_against_every_builtin_tool_schema():
    checked = 0
    for name in ("toolcall-core.jsonl", "toolcall-schemas.jsonl"):
        for line in (DATA / name).read_text().splitlines():
            for tool in json.loads(line).get("tools") or []:
                schema = tool["function"].get("parameters") or {}
                jsonschema.validate(_instance(schema), schema)
                checked += 1
    assert checked > 1000


@pytest.mark.slow
def test_regex_examples():
    for pattern in (r"^\d{4}-\d{2}-\d{2}$", r"^([01]\d|2[0-3]):[0-5]\d$", r"^SKU-[0-9]{6}$", r"^[^x]{2}$",
                    r"(a|bc)+d?"):
        example = _regex_example(pattern)
        assert example is not None
        import re
        assert re.search(pattern, example), (pattern, example)
