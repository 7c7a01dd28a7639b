"""A scripted agent: each environment's oracle, served behind the loopback OpenAI-compatible test server.

Used by the tests (a deterministic policy that must solve every scenario through the real runner, client and
store) and by ``python -m verifier.testing.scripted_agent`` to demo the agent suites without a model.

``OraclePolicy`` is a ``ScriptedServer`` responder. A request whose messages hold no assistant turn starts a new
conversation: the goal text picks the scenario, a fresh environment becomes its *mirror*, and a conversation token
is minted. Every tool call id it returns carries that token (``call_<token>_<n>``); the runner sends ids back, so
later requests find their mirror even when older turns were trimmed or many trials run at once. The policy plays
``next_action()`` on the mirror, so a correct runner reaches the goal in exactly ``horizon`` calls. It also checks
the runner: the tool result sent back must equal what the mirror computed for that call, otherwise it answers
HTTP 400 (the trial ends with an endpoint error: a test failure, never a silent pass).

With ``wrong_rate = q`` a step is instead a schema-valid but wrong call (see :func:`mutate`), which the world
may reject, absorb, or be ruined by: how such slips turn into failed tasks depends on the horizon.

With ``error_rate = p`` each step independently becomes an invalid call (malformed JSON, unknown tool or schema
violation, rotating) with probability p, drawn from a hash of (seed, model, conversation number, call count), so
runs are reproducible. The first invalid step is then geometric: P(first invalid step > t) = (1 - p)^t.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import threading
from typing import Any

from suites.agent.base import Environment
from suites.agent.scenarios import Scenario, builtin_suite
from verifier.testing.replies import Reply, RequestContext
from verifier.testing.scripted_server import ScriptedServer


def uniform(*parts: Any) -> float:
    """A reproducible U(0,1) draw from its labels."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def mutate(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A schema-valid but wrong version of ``arguments``: the kind of slip a degraded model makes.

    The last argument (usually the payload: team, amount, folder, value) is changed: an enum to the next allowed
    value, an integer by +5, a string by one character. Whether the world rejects it, absorbs it or is left in a
    failed state depends on the world.
    """
    if not arguments:
        return arguments
    out = dict(arguments)
    key = list(out)[-1]
    prop = (schema.get("properties") or {}).get(key, {})
    value = out[key]
    if "enum" in prop:
        options = prop["enum"]
        out[key] = options[(options.index(value) + 1) % len(options)] if value in options else options[0]
    elif isinstance(value, bool):
        out[key] = not value
    elif isinstance(value, int):
        out[key] = value + 5
    elif isinstance(value, str):
        out[key] = value[:-1] + ("0" if value[-1:] != "0" else "1") if value else "x"
    return out


_TOKENS = itertools.count()  # conversation tokens, shared by every policy of the process


class OraclePolicy:
    """Plays each scenario's oracle; the conversation's world is found from its goal.

    Several scenarios can share a goal (tickets and ledger at one horizon differ only in their worlds), so a new
    conversation keeps a mirror of *every* scenario with its goal, plays the first one's next action in all of them,
    and keeps the mirrors whose tool result is the one the runner sent back. A world where that action was wrong
    (files seeds with the same goal read different first files) refuses it and the oracle carries on from there:
    the task is still solved, with one refused call more.
    """

    def __init__(self, scenarios: list[Scenario], *, error_rate: float = 0.0, wrong_rate: float = 0.0,
                 seed: int = 0, never_finish: bool = False) -> None:
        self.by_goal: dict[str, list[Scenario]] = {}
        for s in scenarios:
            self.by_goal.setdefault(s.goal, []).append(s)
        self.error_rate = error_rate
        self.wrong_rate = wrong_rate
        self.seed = seed
        self.never_finish = never_finish
        self.mirrors: dict[str, list[Environment]] = {}  # token -> mirrors of the worlds still possible
        self.last_result: dict[str, list[str]] = {}  # token -> the last tool result in each of those worlds
        self.started: dict[tuple[str, str], int] = {}  # (model, goal) -> conversations begun (for draws)
        self.draw_key: dict[str, tuple[str, str, int]] = {}
        self.cache: dict[str, Reply] = {}
        self.lock = threading.Lock()

    def __call__(self, body: dict, ctx: RequestContext) -> Reply:
        with self.lock:
            first = not any(m.get("role") == "assistant" for m in body.get("messages", []))
            if not first and ctx.body_hash in self.cache:  # a client retry of the same body: same answer
                return self.cache[ctx.body_hash]
            reply = self._decide(body)
            if not first:
                self.cache[ctx.body_hash] = reply
            return reply

    def _conversation(self, body: dict) -> tuple[str | None, str | None]:
        """(token, error): the token of an existing conversation, or a new one for a first request."""
        messages = body["messages"]
        goal = next((m["content"] for m in messages if m["role"] == "user"), None)
        assistants = [m for m in messages if m.get("role") == "assistant"]
        if not assistants:
            if goal not in self.by_goal:
                return None, "policy: unknown goal"
            model = str(body.get("model"))
            n = self.started.get((model, goal), 0)
            self.started[(model, goal)] = n + 1
            token = f"{next(_TOKENS):06d}"  # unique in the process: a resumed conversation keeps its old token
            self.mirrors[token] = [s.make_env() for s in self.by_goal[goal]]
            self.draw_key[token] = (model, goal, n)
            return token, None
        calls = assistants[-1].get("tool_calls") or []
        call_id = str(calls[0].get("id", "")) if calls else ""
        parts = call_id.split("_")
        if len(parts) == 3 and parts[1] not in self.mirrors and goal in self.by_goal:
            self._rebuild(parts[1], goal, messages, str(body.get("model")))
        if len(parts) != 3 or parts[1] not in self.mirrors:
            return None, f"policy: cannot find the conversation of tool call id {call_id!r}"
        token = parts[1]
        sent = messages[-1]
        results = self.last_result.get(token, [])
        worlds = [env for env, text in zip(self.mirrors[token], results)
                  if sent.get("role") == "tool" and sent.get("content") == text]
        if not worlds:
            return None, f"policy: runner sent {sent.get('content')!r}, expected {results[:1]!r}"
        self.mirrors[token] = worlds
        return token, None

    def _rebuild(self, token: str, goal: str, messages: list[dict], model: str) -> None:
        """A conversation this server never saw begin (a resumed trial sent to a fresh server, as a stateless model
        server sees every request): replay its calls on fresh mirrors, keeping the worlds whose results are the ones
        the runner sent back. Its error draws use their own key. Turns trimmed from the prompt cannot be replayed:
        such a conversation stays unknown (an HTTP 400, as before)."""
        worlds = [s.make_env() for s in self.by_goal[goal]]
        results: list[str] = []
        for i, m in enumerate(messages):
            for call in m.get("tool_calls") or []:
                fn = call.get("function") or {}
                texts = [w.call(str(fn.get("name") or ""), str(fn.get("arguments") or "")).result_text for w in worlds]
                reply = next((x for x in messages[i + 1:] if x.get("tool_call_id") == call.get("id")), None)
                keep = [j for j, t in enumerate(texts) if reply is not None and reply.get("content") == t]
                worlds, results = [worlds[j] for j in keep], [texts[j] for j in keep]
        if worlds:
            self.mirrors[token], self.last_result[token] = worlds, results
            self.draw_key[token] = (model, goal, -1 - int(token))

    def _decide(self, body: dict) -> Reply:
        token, error = self._conversation(body)
        if token is None:
            return Reply.error(400, error or "policy error", type_="invalid_request_error")
        env = self.mirrors[token][0]
        usage = {"prompt_tokens": len(json.dumps(body["messages"])) // 4 + 1, "completion_tokens": 10,
                 "total_tokens": 0, "prompt_tokens_details": {"cached_tokens": 0}}
        n = len(env.events)
        action = env.next_action()
        if self.never_finish:
            name = env.tools()[-1]["function"]["name"]
            args = '{"prefix": "n-"}' if name == "list_keys" else "{}"
        elif action is None:
            return Reply(content="All done.", usage=usage)
        elif uniform(self.seed, *self.draw_key[token], n) < self.error_rate:
            kind = n % 3
            if kind == 0:
                name, args = action.name, action.arguments_json()[:-1]  # truncated JSON
            elif kind == 1:
                name, args = "no_such_tool", action.arguments_json()
            else:
                name, args = action.name, json.dumps({"unexpected": True})
        elif uniform(self.seed, "wrong", *self.draw_key[token], n) < self.wrong_rate:
            name, args = action.name, json.dumps(mutate(action.arguments, env.tool_schema(action.name)))
        else:
            name, args = action.name, action.arguments_json()
        self.last_result[token] = [world.call(name, args).result_text for world in self.mirrors[token]]
        return Reply(tool_calls=[{"name": name, "arguments": args, "id": f"call_{token}_{n}"}], usage=usage)


def main() -> None:
    """Serve the oracle agent for the built-in suites on 127.0.0.1 (a model-free demo of the agent suites)."""
    ap = argparse.ArgumentParser(description="scripted oracle agent on 127.0.0.1 (OpenAI-compatible)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--error-rate", type=float, default=0.0, help="per-step probability of an invalid call")
    ap.add_argument("--wrong-rate", type=float, default=0.0, help="per-step probability of a valid but wrong call")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="oracle-agent")
    args = ap.parse_args()
    cases = list({s.id: s for name in ("agent-long", "agent-smoke") for s in builtin_suite(name)}.values())
    policy = OraclePolicy(cases, error_rate=args.error_rate, wrong_rate=args.wrong_rate, seed=args.seed)
    srv = ScriptedServer(policy, models=[args.model], port=args.port)
    srv.serve_forever(lambda: f"serving {args.model} on {srv.base_url} "
                              f"(error rate {args.error_rate}, wrong rate {args.wrong_rate})")


if __name__ == "__main__":
    main()
