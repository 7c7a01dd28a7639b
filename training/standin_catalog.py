"""A deliberately small stand-in tool catalogue, used only when ``suites.toolcall.catalog`` is absent.

It lets the corpus/tokenizer/training pipeline be exercised (and tested) on its own. The shipped model is
trained on the real catalogue; ``training/train.py`` refuses to export a stand-in-trained model as the
shipped checkpoint unless told to.
"""

from __future__ import annotations

import random
from typing import Any

CITIES = ["Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Denver", "Perth", "Quito"]
NAMES = ["Ana", "Bo", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana"]

TOOLS: dict[str, dict[str, Any]] = {
    "get_weather": {"description": "Current weather for a city.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"]}},
    "send_email": {"description": "Send an email.", "parameters": {
        "type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
        "required": ["to", "subject"]}},
    "set_timer": {"description": "Start a countdown timer.", "parameters": {
        "type": "object", "properties": {"minutes": {"type": "integer"}}, "required": ["minutes"]}},
}

PHRASES: dict[str, list[str]] = {
    "get_weather": ["What's the weather in {city}?", "Is it raining in {city} right now?"],
    "send_email": ["Email {to} with subject {subject}.", "Send {to} a mail titled {subject}."],
    "set_timer": ["Set a timer for {minutes} minutes.", "Remind me in {minutes} minutes."],
}
NO_TOOL = ["Tell me a joke.", "What is the capital of Peru?", "Write a haiku about tea."]


def _sample(tool: str, rng: random.Random) -> dict[str, Any]:
    if tool == "get_weather":
        return {"city": rng.choice(CITIES)}
    if tool == "send_email":
        return {"to": f"{rng.choice(NAMES).lower()}@example.com", "subject": rng.choice(["lunch", "report", "hello"])}
    return {"minutes": rng.randint(1, 90)}


def generate_cases(seed: int, n: int) -> list[dict[str, Any]]:
    """Request-body lines with ``_meta.expected``, in the toolcall suite format."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        offered = rng.sample(sorted(TOOLS), k=rng.randint(1, len(TOOLS)))
        tools = [{"type": "function", "function": {"name": t, **TOOLS[t]}} for t in offered]
        if rng.random() < 0.2:
            user, expected = rng.choice(NO_TOOL), None
        else:
            tool = rng.choice(offered)
            args = _sample(tool, rng)
            user = rng.choice(PHRASES[tool]).format(**args)
            expected = {"tool": tool, "arguments": args}
        out.append({"messages": [{"role": "user", "content": user}], "tools": tools,
                    "_meta": {"id": f"standin-{seed}-{i}", "expected": expected}})
    return out
