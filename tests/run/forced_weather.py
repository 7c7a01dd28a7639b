"""A forced-call weather suite of ``n`` cases, shared by the sequential-mode tests (run and report)."""

from __future__ import annotations

import json
from pathlib import Path

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}


def forced_weather_suite(tmp_path: Path, n: int) -> Path:
    """``weather.jsonl``: ``n`` cases ``w000``… whose ``tool_choice`` is ``required`` (every reply must call)."""
    p = tmp_path / "weather.jsonl"
    p.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": f"weather in city {i}?"}],
                                       "tools": [TOOL], "tool_choice": "required", "_meta": {"id": f"w{i:03d}"}})
                           for i in range(n)) + "\n")
    return p
