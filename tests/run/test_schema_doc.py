"""The published summary.json schema must be the one RunSummary produces (CI users code against the file)."""

from __future__ import annotations

import json
from pathlib import Path

from verifier.run.summary import RunSummary

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "summary.schema.json"


def test_published_schema_matches_model():
    assert json.loads(SCHEMA.read_text()) == RunSummary.model_json_schema(), (
        "docs/summary.schema.json is stale: regenerate with python -m verifier.run.summary > docs/summary.schema.json")
