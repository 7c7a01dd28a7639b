"""Generate the logprob suite data (``logprob-core.jsonl``): short chat, plain-text and tool-call-style prompts.

Prompts are short on purpose: the built-in tiny model has a small context, and KL is measured per token
over the continuation, so many short sequences (the bootstrap unit) beat a few long ones. Deterministic:
re-running writes the same file. Run: ``python suites/logprob/build.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent / "logprob-core.jsonl"

TEXTS = [
    "The history of the printing press begins in",
    "To configure a reverse proxy, first install",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Photosynthesis converts light energy into",
    "The meeting was moved to Thursday because",
    "SELECT name, email FROM users WHERE",
    "Once upon a time, in a village by the sea,",
    "The three laws of thermodynamics state that",
    "{\"order_id\": 1842, \"status\": \"shipped\", \"items\": [",
    "In distributed systems, consensus algorithms such as Raft",
    "Step 1: preheat the oven to 200 degrees. Step 2:",
    "The quarterly report shows revenue grew by",
]

CHATS = [
    "Explain in two sentences why the sky is blue.",
    "Write a haiku about a lighthouse.",
    "What is the capital of Australia, and why is it not Sydney?",
    "List three uses of a hash map.",
    "Summarise the plot of a heist movie in one paragraph.",
    "How do I reverse a list in Python?",
]

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                            "unit": {"type": "string", "enum": ["c", "f"]}},
                          "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search_files", "description": "Search files by name pattern",
          "parameters": {"type": "object", "properties": {"pattern": {"type": "string"},
                                                           "limit": {"type": "integer", "minimum": 1}},
                         "required": ["pattern"]}}}
TICKET = {"type": "function", "function": {"name": "create_ticket", "description": "Open a support ticket",
          "parameters": {"type": "object", "properties": {"title": {"type": "string"},
                                                           "priority": {"type": "string", "enum": ["low", "high"]}},
                         "required": ["title", "priority"]}}}

TOOL_CHATS = [
    ([WEATHER], [{"role": "user", "content": "What's the weather in Lisbon right now?"}]),
    ([SEARCH], [{"role": "user", "content": "Find all the YAML files in the repo, at most 5."}]),
    ([TICKET, SEARCH], [{"role": "user", "content": "The login page is down, please open an urgent ticket."}]),
    ([WEATHER], [
        {"role": "user", "content": "Is it warmer in Oslo or in Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"city\": \"Oslo\", \"temp_c\": 4}"},
    ]),
    ([SEARCH], [
        {"role": "user", "content": "How many Python files are there under src?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_7", "type": "function", "function": {
            "name": "search_files", "arguments": "{\"pattern\": \"src/**/*.py\"}"}}]},
        {"role": "tool", "tool_call_id": "call_7", "content": "[\"src/a.py\", \"src/b.py\", \"src/util/c.py\"]"},
    ]),
    ([TICKET], [{"role": "system", "content": "You are a support agent. Use tools when needed."},
                {"role": "user", "content": "Printer on floor 3 jams every morning; low priority."}]),
]

# logprob-smoke: the first cases of each group. 12 prompts, so that its KL headline rests on at least the 10
# independent prompts the verdict asks for (``[verdict.min_units] kl_mean``, docs/verdict.md) with a margin: with
# 7 the default run's KL was "not testable" and could not make a verdict consistent.
SMOKE = {"text": 6, "chat": 3, "tool": 3}


def cases() -> list[dict]:
    out: list[dict] = []
    for i, t in enumerate(TEXTS):
        out.append({"id": f"text-{i:02d}", "kind": "text", "prompt": t, "max_tokens": 32, "smoke": i < SMOKE["text"]})
    for i, c in enumerate(CHATS):
        out.append({"id": f"chat-{i:02d}", "kind": "chat", "messages": [{"role": "user", "content": c}],
                    "max_tokens": 32, "smoke": i < SMOKE["chat"]})
    for i, (tools, msgs) in enumerate(TOOL_CHATS):
        out.append({"id": f"tool-{i:02d}", "kind": "chat", "messages": msgs, "tools": tools, "max_tokens": 32,
                    "smoke": i < SMOKE["tool"]})
    return out


if __name__ == "__main__":
    OUT.write_text("".join(json.dumps(c, sort_keys=True) + "\n" for c in cases()))
    print(f"wrote {OUT} ({len(cases())} cases)")
