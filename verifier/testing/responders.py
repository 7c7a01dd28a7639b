"""Responders for :class:`~verifier.testing.scripted_server.ScriptedServer`: a schema-valid answer to any
request, and :class:`FaultInjector`, which wraps a responder and injects provider faults at chosen rates.

Why apart from the server: the server is the wire (bytes, chunking, cut streams); these decide what a provider
would say. The injector's decisions depend only on (seed, request hash, attempt), never on arrival order, so a
concurrent run injects exactly the same faults every time and tests can assert exact counts.
"""

from __future__ import annotations

import collections
import json
import random
import threading
from dataclasses import dataclass, field
from typing import Any

from verifier.testing.replies import Reply, RequestContext, Responder


def _regex_example(pattern: str) -> str | None:
    """A short string matching ``pattern`` (walks Python's parsed regex: first branch, minimum repeats)."""
    import re
    from re import _constants as C  # type: ignore[attr-defined]  # noqa: N812 - stdlib's own regex parser
    from re import _parser as P  # type: ignore[attr-defined]  # (private, so not in the type stubs)

    cat = {C.CATEGORY_DIGIT: "0", C.CATEGORY_WORD: "a", C.CATEGORY_SPACE: " ", C.CATEGORY_NOT_DIGIT: "a",
           C.CATEGORY_NOT_WORD: "-", C.CATEGORY_NOT_SPACE: "a"}

    def gen(items: Any) -> str:
        out = []
        for op, av in items:
            if op is C.LITERAL:
                out.append(chr(av))
            elif op is C.NOT_LITERAL:
                out.append("a" if av != ord("a") else "b")
            elif op is C.ANY:
                out.append("a")
            elif op is C.IN:
                first = av[0]
                if first[0] is C.NEGATE:
                    out.append("a" if not any(o is C.LITERAL and v == ord("a") for o, v in av[1:]) else "b")
                elif first[0] is C.LITERAL:
                    out.append(chr(first[1]))
                elif first[0] is C.RANGE:
                    out.append(chr(first[1][0]))
                elif first[0] is C.CATEGORY:
                    out.append(cat.get(first[1], "a"))
                else:
                    out.append("a")
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
                lo, _hi, sub = av
                out.append(gen(sub) * max(lo, 0))
            elif op is C.SUBPATTERN:
                out.append(gen(av[-1]))
            elif op is C.BRANCH:
                out.append(gen(av[1][0]))
            elif op is C.CATEGORY:
                out.append(cat.get(av, "a"))
        return "".join(out)

    try:
        candidate = gen(P.parse(pattern))
        return candidate if re.search(pattern, candidate) else None
    except Exception:  # noqa: BLE001 - exotic patterns: the caller falls back
        return None


def _instance(schema: dict, depth: int = 0, root: dict | None = None) -> Any:
    """A small value valid against a JSON Schema (the subset tool schemas use)."""
    root = schema if root is None else root
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and depth < 20:
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _instance(target, depth + 1, root)
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _instance(schema[key][0], depth + 1, root)
    t = schema.get("type", "object")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t == "object":
        props = schema.get("properties") or {}
        keys = list(schema.get("required", []))
        for k in props:  # honour minProperties with optional properties
            if len(keys) >= schema.get("minProperties", 0):
                break
            if k not in keys:
                keys.append(k)
        return {k: _instance(props.get(k, {}), depth + 1, root) for k in keys}
    if t == "array":
        prefix = [_instance(p, depth + 1, root) for p in schema.get("prefixItems") or []]
        raw_items = schema.get("items")
        items: dict[str, Any] = raw_items if isinstance(raw_items, dict) else {"type": "string"}
        return prefix + [_instance(items, depth + 1, root)
                         for _ in range(max(0, schema.get("minItems", 0) - len(prefix)))]
    if t == "integer":
        if "exclusiveMinimum" in schema:
            return int(schema["exclusiveMinimum"]) + 1
        return int(schema.get("minimum", 1))
    if t == "number":
        if "exclusiveMinimum" in schema:
            return float(schema["exclusiveMinimum"]) + 0.5
        return float(schema.get("minimum", 1.5))
    if t == "boolean":
        return True
    if t == "null":
        return None
    if isinstance(schema.get("pattern"), str):
        found = _regex_example(schema["pattern"])
        if found is not None:
            return found
    fmt = {"date": "2024-01-31", "date-time": "2024-01-31T12:00:00Z", "email": "a@example.com",
           "uri": "https://example.com/", "time": "12:00:00"}.get(schema.get("format", ""))
    return fmt or "x" * max(1, int(schema.get("minLength", 1)))


def schema_responder(body: dict, ctx: RequestContext) -> Reply:
    """A deterministic stand-in model: calls the forced (or first) tool with minimal valid arguments.

    Requests whose last user message hashes into the bottom quarter get a text answer instead, so trigger
    metrics see both outcomes; ``tool_choice: "none"`` always gets text.
    """
    tools = body.get("tools") or []
    choice = body.get("tool_choice")
    if not tools or choice == "none":
        return Reply.text("No tool needed.")
    forced = None
    if isinstance(choice, dict):
        forced = (choice.get("function") or {}).get("name")
    if forced is None and choice != "required" and int(ctx.body_hash[:2], 16) < 64:
        return Reply.text("I can answer that without a tool.")
    fn = next((t["function"] for t in tools if t.get("function", {}).get("name") == forced),
              tools[0].get("function", {}))
    return Reply.tool_call(fn.get("name", "unknown"), _instance(fn.get("parameters") or {}))


@dataclass
class FaultInjector:
    """Wraps a responder and injects faults at chosen rates, deterministically per (seed, request, attempt).

    ``rates`` keys: ``"429"`` (with Retry-After = ``retry_after``), ``"500"``, ``"truncate"`` (streams only:
    connection dropped after two events), ``"malformed_args"`` (argument JSON cut in half), ``"schema_violation"``
    (required arguments removed, or a property given the wrong type). At most one fault per attempt, tried in
    that order. Per-request faults, the same on every attempt (so no retry gets through): ``"permanent_500"``,
    ``"hostile_body"`` (a 200 whose JSON body or SSE data lines have shapes no parser foresaw, see
    :data:`HOSTILE_BODIES` and :data:`HOSTILE_STREAMS`) and ``"lone_surrogate"`` (content or arguments carrying a
    lone UTF-16 surrogate, and a non-BMP character split across two deltas). Transport faults (429/500/truncate) apply
    to first attempts only unless ``every_attempt``, so a
    retrying client always gets through and totals are exact. Content faults are decided per request (every
    attempt of a request gets the same one). ``injected`` counts what was injected: transport faults per attempt,
    content faults per request.
    """

    inner: Responder
    rates: dict[str, float]
    seed: int = 0
    retry_after: float = 0.01
    every_attempt: bool = False
    injected: collections.Counter = field(default_factory=collections.Counter)
    injected_keys: dict[str, set] = field(default_factory=lambda: collections.defaultdict(set))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def draw(self, key: str, attempt: int, fault: str) -> bool:
        rate = self.rates.get(fault, 0.0)
        if rate <= 0:
            return False
        return random.Random(f"{self.seed}|{key}|{attempt}|{fault}").random() < rate

    def _count(self, fault: str, key: str, *, once_per_request: bool = False) -> None:
        with self._lock:
            if once_per_request and key in self.injected_keys[fault]:
                return  # content faults repeat on every attempt of a request; they reach the records once
            self.injected[fault] += 1
            self.injected_keys[fault].add(key)

    def __call__(self, body: dict, ctx: RequestContext) -> Reply:
        key = ctx.body_hash
        if self.draw(key, 0, "permanent_500"):
            self._count("permanent_500", key, once_per_request=True)
            return Reply.error(500, "server error (injected, permanent)", type_="server_error")
        if self.draw(key, 0, "hostile_body"):
            self._count("hostile_body", key, once_per_request=True)
            pick = random.Random(f"{self.seed}|{key}|hostile").randrange(len(HOSTILE_BODIES))
            if body.get("stream"):
                return Reply(raw_events=HOSTILE_STREAMS[pick % len(HOSTILE_STREAMS)])
            return Reply(body=HOSTILE_BODIES[pick])
        transport_ok = self.every_attempt or ctx.attempt == 1
        if transport_ok and self.draw(key, ctx.attempt, "429"):
            self._count("429", key)
            return Reply.error(429, "rate limited (injected)", retry_after=self.retry_after, type_="rate_limit")
        if transport_ok and self.draw(key, ctx.attempt, "500"):
            self._count("500", key)
            return Reply.error(500, "server error (injected)", type_="server_error")
        reply = self.inner(body, ctx)
        if transport_ok and body.get("stream") and self.draw(key, ctx.attempt, "truncate"):
            self._count("truncate", key)
            reply.truncate_after_chunks = 2
        if reply.tool_calls and self.draw(key, 0, "malformed_args"):
            self._count("malformed_args", key, once_per_request=True)
            for tc in reply.tool_calls:
                a = tc["arguments"] if isinstance(tc["arguments"], str) else json.dumps(tc["arguments"])
                tc["arguments"] = a[: max(1, len(a) // 2)]
        elif self.draw(key, 0, "lone_surrogate"):
            self._count("lone_surrogate", key, once_per_request=True)
            if reply.tool_calls:  # "\ud83d\ude00" once the JSON is read: a pair the stream splits in two deltas
                # 15 characters in two deltas of 8 and 7: the pair is cut between its halves, as JS/Java servers do
                reply.tool_calls = [{**tc, "arguments": '{"n": "\ud83d\ude00 \ud83dxx"}'} for tc in reply.tool_calls]
                reply.argument_pieces = 2
            else:
                reply.content = (reply.content or "") + " \ud83d"
        elif reply.tool_calls and self.draw(key, 0, "schema_violation"):
            self._count("schema_violation", key, once_per_request=True)
            tools = {t.get("function", {}).get("name"): t.get("function", {}) for t in body.get("tools") or []}
            for tc in reply.tool_calls:
                tc["arguments"] = _violate((tools.get(tc["name"]) or {}).get("parameters") or {}, tc["arguments"])
        return reply


#: 200 bodies with shapes a parser must survive: each must end as a classified record or a scored one, never a crash.
HOSTILE_BODIES: list[Any] = [
    {"choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": 7},
                  "finish_reason": {}}]},
    {"choices": ["not a choice"]},
    {"choices": {"0": {"message": {}}}},
    {"choices": [{"message": {"tool_calls": [{"function": {"name": {"n": 1}, "arguments": {"a": [1]}}, "id": 5}]},
                  "finish_reason": ["tool_calls"]}], "usage": {"input_tokens": 3, "cache_read_input_tokens": "many"}},
    [1, 2, 3],
    "just a string",
    {"choices": [{"message": {"content": {"nested": True}, "reasoning": 3}, "logprobs": {"content": "x"},
                  "finish_reason": 0}]},
    {"error": None, "choices": []},
]

#: SSE data payload lists sent verbatim on a 200 stream (then ``[DONE]``).
HOSTILE_STREAMS: list[list[str]] = [
    ["{not json", "oops", "[1, 2]", "null"],
    ['{"choices": [{"index": 0, "delta": {"tool_calls": 7}, "finish_reason": {}}]}'],
    ['{"choices": "nope"}', '{"choices": [5, "x"]}'],
    ['{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": -4, "function": {"name": [1], "arguments": {"a": '
     '1}}}]}}]}',
     '{"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": "ten"}}'],
    ["[" * 3000],
]


def _violate(schema: dict, args: Any) -> dict:
    """Arguments that break ``schema``: drop the required keys, or give the first property a wrong type."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = {}
    args = dict(args) if isinstance(args, dict) else {}
    required = schema.get("required") or []
    if required:
        for k in required:
            args.pop(k, None)
        return args
    props = schema.get("properties") or {}
    if props:
        name, sub = next(iter(props.items()))
        args[name] = 12345 if sub.get("type") == "string" else "not-the-right-type"
        return args
    return {"__unexpected__": [1, 2, 3]} if schema.get("additionalProperties") is False else args
