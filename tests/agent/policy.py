"""A scripted agent for tests: the environment's oracle, served behind the loopback OpenAI-compatible server.

``OraclePolicy`` is a ``ScriptedServer`` responder. For each conversation (identified by model id + goal text) it
keeps a mirror of the scenario's environment, plays ``next_action()`` on it and answers with that tool call, so a
correct runner reaches the goal in exactly ``horizon`` calls. It also checks the runner: the tool result the
runner sent back must equal what the mirror computed for the same call, otherwise it answers HTTP 400 and the
trial ends with an endpoint error (a test failure, not a silent pass).

With ``error_rate = p`` each step independently becomes an invalid call (malformed JSON, unknown tool or schema
violation, rotating) with probability p, drawn from a hash of (seed, conversation, call count) so runs are
reproducible. The first invalid step is then geometric: P(first invalid step > t) = (1 - p)^t.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from suites.agent.base import Environment
from suites.agent.scenarios import Scenario
from verifier.testing.scripted_server import Reply, RequestContext


def uniform(*parts: Any) -> float:
    """A reproducible U(0,1) draw from its labels."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class OraclePolicy:
    def __init__(self, scenarios: list[Scenario], *, error_rate: float = 0.0, seed: int = 0,
                 never_finish: bool = False) -> None:
        self.by_goal = {s.goal: s for s in scenarios}
        self.error_rate = error_rate
        self.seed = seed
        self.never_finish = never_finish
        self.mirrors: dict[tuple[str, str], Environment] = {}
        self.last_result: dict[tuple[str, str], str] = {}
        self.cache: dict[str, Reply] = {}
        self.lock = threading.Lock()

    def __call__(self, body: dict, ctx: RequestContext) -> Reply:
        with self.lock:
            if ctx.body_hash in self.cache:  # a client retry of the same body: answer identically
                return self.cache[ctx.body_hash]
            reply = self._decide(body)
            self.cache[ctx.body_hash] = reply
            return reply

    def _decide(self, body: dict) -> Reply:
        messages = body["messages"]
        goal = next(m["content"] for m in messages if m["role"] == "user")
        key = (str(body.get("model")), goal)
        env = self.mirrors.get(key)
        if env is None:
            env = self.mirrors[key] = self.by_goal[goal].make_env()
        if key in self.last_result:
            sent = messages[-1]
            if sent.get("role") != "tool" or sent.get("content") != self.last_result[key]:
                return Reply.error(400, f"policy: runner sent {sent.get('content')!r}, expected "
                                        f"{self.last_result[key]!r}", type_="invalid_request_error")
        usage = {"prompt_tokens": len(json.dumps(messages)) // 4 + 1, "completion_tokens": 10,
                 "total_tokens": 0, "prompt_tokens_details": {"cached_tokens": 0}}
        n = len(env.events)
        action = env.next_action()
        if self.never_finish:
            name, args = "list_keys" if "list_keys" in env._tools else env.tools()[-1]["function"]["name"], "{}"
            if name == "list_keys":
                args = '{"prefix": "n-"}'
        elif action is None:
            self.last_result.pop(key, None)
            return Reply(content="All done.", usage=usage)
        elif uniform(self.seed, *key, n) < self.error_rate:
            kind = n % 3
            if kind == 0:
                name, args = action.name, action.arguments_json()[:-1]  # truncated JSON
            elif kind == 1:
                name, args = "no_such_tool", action.arguments_json()
            else:
                name, args = action.name, json.dumps({"unexpected": True})
        else:
            name, args = action.name, action.arguments_json()
        outcome = env.call(name, args)
        self.last_result[key] = outcome.result_text
        return Reply(tool_calls=[{"name": name, "arguments": args, "id": f"call_{n}"}], usage=usage)
