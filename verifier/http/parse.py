"""Response parsers: turn an OpenAI-compatible chat completion (a JSON body or an SSE stream) into Exchange fields.

Split out of :mod:`verifier.http.client` so the code that moves bytes (client, transport) and the code that reads
what came back can change and be tested apart: the parsers are pure functions of the body, and a fuzz test
drives them with thousands of mutated bodies (tests/http/test_fuzz_parsers.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

from verifier.http import redaction
from verifier.json_depth import too_deep
from verifier.records import OPENAI_FINISH_REASONS, Usage

#: wire issues that mean the model's decision cannot be read (a message that is not an object, tool calls that
#: are not a list or not objects, a finish reason that is not text, arguments nested past what any reader can
#: recurse into): the exchange is a provider fault (``malformed_response``), never scored as "the model called no
#: tool" or as the model's invalid call
UNREADABLE_SHAPES = frozenset({"malformed_message", "tool_calls_not_list", "malformed_tool_call",
                               "malformed_tool_call_delta", "tool_call_name_not_string", "content_not_text",
                               "malformed_finish_reason", "tool_call_arguments_too_deep"})


def _classify_shape(out: dict) -> dict:
    """Mark ``out`` as ``malformed_response`` when one of its wire issues makes the reply unreadable."""
    bad = sorted({i for i in out.get("wire_issues", []) if i.split(":", 1)[0] in UNREADABLE_SHAPES})
    if bad and not out.get("error_class"):
        out["error_class"] = "malformed_response"
        out["error_message"] = "unreadable reply shape: " + ", ".join(bad)
    return out


class _BrokenStream(Exception):
    """The SSE stream ended incomplete (no ``data: [DONE]`` and no finish), or the provider reported an error in it."""


def _error_text(err: Any) -> str:
    """A provider's in-band error object (or string) as one short line, redacted before the cut."""
    message = err.get("message") if isinstance(err, dict) else err
    return redaction.truncate(_as_text(message) if message is not None else _as_text(err), 200) or ""


def _reported_error(data: dict, choice: Any) -> str | None:
    """The error a 200 reply reports in band, or None: a non-null ``error`` member (OpenRouter's mid-generation
    shape carries one beside ``choices``) or a choice whose ``finish_reason`` is ``"error"``."""
    err = data.get("error")
    if err not in (None, {}, "", []):
        return _error_text(err)
    if isinstance(choice, dict) and choice.get("finish_reason") == "error":
        return "finish_reason 'error'"
    return None


def normalize_usage(usage: Any) -> Usage:
    """Map the vendors' usage dialects onto :class:`Usage`; ``cached_tokens=None`` when caching is not reported."""
    return Usage.model_validate(_usage_dict(usage))


def _usage_dict(usage: Any) -> dict[str, Any]:
    if not isinstance(usage, dict):
        return {"prompt_tokens": None, "completion_tokens": None, "cached_tokens": None, "cached_field": None}
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    cached = None
    cached_field = None
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        cached, cached_field = details["cached_tokens"], "prompt_tokens_details.cached_tokens"
    elif isinstance(usage.get("prompt_cache_hit_tokens"), int):
        cached, cached_field = usage["prompt_cache_hit_tokens"], "prompt_cache_hit_tokens"
    elif isinstance(usage.get("cache_read_input_tokens"), int):
        cached, cached_field = usage["cache_read_input_tokens"], "cache_read_input_tokens"
    if prompt is None and isinstance(usage.get("input_tokens"), int):
        # Anthropic counts cache reads/writes outside input_tokens; the prompt is their sum.
        prompt = usage["input_tokens"] + _int_or_zero(usage.get("cache_read_input_tokens")) + _int_or_zero(
            usage.get("cache_creation_input_tokens"))
    if completion is None and isinstance(usage.get("output_tokens"), int):
        completion = usage["output_tokens"]
    return {"prompt_tokens": prompt if isinstance(prompt, int) else None,
            "completion_tokens": completion if isinstance(completion, int) else None,
            "cached_tokens": cached, "cached_field": cached_field}


def _int_or_zero(v: Any) -> int:
    """A count a provider may send as anything: an int counts, every other shape counts as 0."""
    return v if isinstance(v, int) else 0


def _finish_str(v: Any) -> str | None:
    """A finish reason as text: a provider's ``{}`` or ``7`` is kept (as text) for the wire issue, never raised on."""
    if v is None or isinstance(v, str):
        return v
    try:
        return redaction.truncate(json.dumps(v, ensure_ascii=False), 200)  # redact before the cut
    except (TypeError, ValueError, RecursionError):
        return type(v).__name__


_SURROGATE = re.compile("[\ud800-\udfff]")


def _join_text(pieces: list[str]) -> str:
    """Join streamed pieces, pairing UTF-16 surrogates split across deltas (JS/Java servers stream a non-BMP
    character as two ``\\uXXXX`` escapes in two chunks); a lone surrogate is kept as is (the store escapes it)."""
    text = "".join(pieces)
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def _content_text(v: Any, issues: list[str]) -> str | None:
    """Message content as text. A list (content parts, a known dialect) is kept as its JSON text with the wire issue
    ``content_not_string``; any other shape (an object, a number) is unreadable (``content_not_text``: the reply
    becomes malformed_response, never a model's answer)."""
    if v is None or isinstance(v, str):
        return v
    issues.append("content_not_string" if isinstance(v, list) else "content_not_text")
    return _as_text(v)


def _as_text(v: Any) -> str:
    """Any JSON value as text: strings as they are, other values as JSON (never raises)."""
    if isinstance(v, str):
        return v
    try:
        return json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(type(v).__name__)


def _tool_call_issues(calls: list[dict[str, Any]]) -> list[str]:
    issues = []
    seen: set[str] = set()
    for c in calls:
        cid, idx = c["id"], c["index"]
        if not c["name"]:
            issues.append(f"tool_call_missing_name:{idx}")
        if not cid:
            issues.append(f"tool_call_missing_id:{idx}")
            continue
        if cid in seen:
            issues.append(f"duplicate_tool_call_id:{cid[:64]}")
        seen.add(cid)
        if len(cid) > 256 or any(ch.isspace() for ch in cid):
            issues.append(f"tool_call_id_format:{idx}")
    return issues


def _finish_issues(finish: str | None, calls: list[dict[str, Any]]) -> list[str]:
    issues = []
    if finish is None:
        issues.append("missing_finish_reason")
    elif finish not in OPENAI_FINISH_REASONS:
        issues.append(f"unknown_finish_reason:{str(finish)[:40]}")
    if finish == "tool_calls" and not calls:
        issues.append("finish_tool_calls_without_calls")
    if calls and finish not in (None, "tool_calls", "function_call"):
        issues.append(f"tool_calls_with_finish_reason:{str(finish)[:40]}")
    return issues


def _loads_or_text(data: str) -> Any:
    """An SSE event's data as JSON when it is JSON, else the text itself."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return data


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) or v is None else _as_text(v)


def _exchange_defaults(ex: dict) -> dict:
    """Fill every Exchange field (explicitly, so the record on disk always has the full shape)."""
    ex.setdefault("status", None)
    ex.setdefault("error_class", None)
    ex.setdefault("error_message", None)
    ex.setdefault("ttft_s", None)
    ex.setdefault("latency_s", None)
    ex.setdefault("chunk_times_s", [])
    ex.setdefault("response", None)
    ex.setdefault("content", None)
    ex.setdefault("reasoning_content", None)
    ex.setdefault("finish_reason", None)
    ex.setdefault("tool_calls", [])
    if "usage" not in ex:
        ex["usage"] = _usage_dict(None)
    ex.setdefault("logprobs", None)
    return ex


def _from_completion(status: int, data: Any) -> dict:
    """Pull the measured fields out of a non-streamed chat completion (tolerant: oddities become wire issues)."""
    issues: list[str] = []
    if isinstance(data, dict):
        choices = data.get("choices")
        reported = _reported_error(data, choices[0] if isinstance(choices, list) and choices else None)
        if reported is not None:
            return {"status": status, "response": data, "error_class": "provider_error",
                    "error_message": "the provider reported an error in a 200 reply: " + reported,
                    "wire_issues": ["error_in_body"]}
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        return {"status": status, "response": data if isinstance(data, dict) else None,
                "error_class": "malformed_response", "error_message": "completion has no choices",
                "wire_issues": ["no_choices"]}
    if not isinstance(data["choices"][0], dict):
        return {"status": status, "response": data, "error_class": "malformed_response",
                "error_message": "completion's first choice is not an object", "wire_issues": ["malformed_choice"]}
    choice = data["choices"][0]
    raw_msg = choice.get("message")
    msg: dict[str, Any] = raw_msg if isinstance(raw_msg, dict) else {}
    if not isinstance(raw_msg, dict):
        issues.append("malformed_message")
    raw_calls = msg.get("tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        issues.append("tool_calls_not_list")
        raw_calls = None
    calls = []
    for i, tc in enumerate(raw_calls or []):
        if not isinstance(tc, dict):
            issues.append("malformed_tool_call")
            continue
        raw_fn = tc.get("function")
        fn: dict[str, Any] = raw_fn if isinstance(raw_fn, dict) else {}
        args = fn.get("arguments")
        if args is not None and not isinstance(args, str):
            issues.append(f"tool_call_arguments_not_string:{i}")
            args = _as_text(args)
        name = fn.get("name")
        if name is not None and not isinstance(name, str):
            issues.append(f"tool_call_name_not_string:{i}")
        if args and too_deep(args):
            issues.append(f"tool_call_arguments_too_deep:{i}")
        calls.append({"index": i, "id": _str_or_none(tc.get("id")), "type": _str_or_none(tc.get("type")),
                      "name": _str_or_none(name), "arguments": args or ""})
    raw_finish = choice.get("finish_reason")
    if raw_finish is not None and not isinstance(raw_finish, str):
        issues.append("malformed_finish_reason")
    finish = _finish_str(raw_finish)
    issues += _finish_issues(finish, calls) + _tool_call_issues(calls)
    reasoning = msg.get("reasoning_content")
    if reasoning is None:
        reasoning = msg.get("reasoning")
    lp = choice.get("logprobs")
    content = _content_text(msg.get("content"), issues)
    lp_content = lp.get("content") if isinstance(lp, dict) else None
    if lp_content is not None and not (isinstance(lp_content, list) and all(isinstance(x, dict) for x in lp_content)):
        issues.append("malformed_logprobs")
        lp_content = None
    return _classify_shape({"status": status, "response": data, "content": content,
                            "reasoning_content": reasoning if isinstance(reasoning, str) else None,
                            "finish_reason": finish,
                            "tool_calls": calls, "usage": _usage_dict(data.get("usage")),
                            "logprobs": lp_content, "wire_issues": issues})


class _StreamAccumulator:
    """Reassembles chat-completion chunks the way OpenAI streams them (content, reasoning, tool-call deltas)."""

    def __init__(self) -> None:
        self.done = False
        self.events = 0
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: Any = None
        self.logprobs: list | None = None
        self.issues: list[str] = []
        self.ttft: float | None = None
        self.times: list[float] = []
        self.meta: dict[str, Any] = {}
        self.role: str | None = None
        self.chunks = 0  # data lines that were a completion chunk (an object choice, or a usage object)
        self.last_call: int | None = None  # the call the latest tool-call delta went to (index-less deltas follow it)
        self.final_usage = False  # a usage object arrived in the finish chunk or after it

    @property
    def complete(self) -> bool:
        """The reply is whole without ``[DONE]``: a finish reason arrived, and a usage object with it or after it
        (the usage chunk the client asks for comes last).

        Why: K2VV and the openai SDK accept a stream that closes cleanly after its last chunk; a stream cut before
        the finish (or between the finish and the usage it was asked for) stays broken.
        """
        return self.final_usage

    def feed(self, data: str, t: float, event: str = "message") -> bool:
        """Consume one SSE event's data; True at ``[DONE]``. Raises :class:`_BrokenStream` when the provider reports
        an error in the stream (an ``event: error``, an ``error`` member, ``finish_reason: "error"``): what it sent
        before is a partial reply, never the model's answer."""
        if event == "error":
            payload = _loads_or_text(data)
            if isinstance(payload, dict) and payload.get("error") is not None:
                payload = payload["error"]
            raise _BrokenStream("error event in stream: " + _error_text(payload))
        if data == "[DONE]":
            self.done = True
            return True
        self.events += 1
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            self.issues.append("malformed_chunk")
            return False
        if not isinstance(chunk, dict):
            self.issues.append("malformed_chunk")
            return False
        if "error" in chunk and "choices" not in chunk:
            raise _BrokenStream("error event in stream: " + _error_text(chunk["error"]))
        choices = chunk.get("choices")
        reported = _reported_error(chunk, choices[0] if isinstance(choices, list) and choices else None)
        if reported is not None:
            raise _BrokenStream("error event in stream: " + reported)
        usage = chunk.get("usage")
        if usage is not None:
            self.usage = usage
        usable = type(usage) is dict  # a completion chunk: a usage object, or (below) an object choice
        if not isinstance(choices, list):
            self.issues.append("chunk_without_choices")
            self.chunks += usable
            self.final_usage = self.final_usage or (usable and self.finish is not None)
            return False
        if not self.meta:
            self.meta = {k: chunk.get(k) for k in ("id", "created", "model", "system_fingerprint")}
        for choice in choices:
            if type(choice) is not dict:
                self.issues.append("malformed_chunk")
                continue
            usable = True
            if choice.get("index", 0) not in (0, None):
                continue
            self._delta(choice, t)
        self.chunks += usable
        self.final_usage = self.final_usage or (type(usage) is dict and self.finish is not None)
        return False

    def _delta(self, choice: dict, t: float) -> None:
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        seen_token = False
        if delta.get("role") and self.role is None:
            self.role = _str_or_none(delta["role"])
        c = delta.get("content")
        if c:
            if type(c) is not str:
                c = _content_text(c, self.issues) or ""
            self.content.append(c)
            seen_token = True
        r = delta.get("reasoning_content")
        if r is None:
            r = delta.get("reasoning")
        if isinstance(r, str) and r:
            self.reasoning.append(r)
            seen_token = True
        deltas = delta.get("tool_calls")
        if deltas is not None and type(deltas) is not list:
            self.issues.append("tool_calls_not_list")
            deltas = None
        for tc in deltas or ():
            if not isinstance(tc, dict):
                self.issues.append("malformed_tool_call_delta")
                continue
            idx = self._call_index(tc)
            self.last_call = idx
            acc = self.calls.get(idx)
            if acc is None:
                acc = self.calls[idx] = {"id": None, "type": None, "name": None, "arguments": []}
            tid = _str_or_none(tc.get("id"))
            if tid:
                if acc["id"] is None:
                    acc["id"] = tid
                elif acc["id"] != tid:
                    self.issues.append(f"tool_call_id_changed:{idx}")
            if tc.get("type"):
                acc["type"] = _str_or_none(tc["type"])
            raw_fn = tc.get("function")
            fn: dict[str, Any] = raw_fn if isinstance(raw_fn, dict) else {}
            raw_name = fn.get("name")
            if raw_name is not None and not isinstance(raw_name, str):
                self.issues.append(f"tool_call_name_not_string:{idx}")
            name = _str_or_none(raw_name)
            if name:
                if acc["name"] is None:
                    acc["name"] = name
                elif name == acc["name"]:
                    self.issues.append(f"tool_call_name_repeated:{idx}")
                else:
                    acc["name"] += name
                    acc["name_last_delta"] = name  # what a client that replaces the name (K2VV's) keeps
            args = fn.get("arguments")
            if args:
                acc["arguments"].append(_as_text(args))
            seen_token = True
        lp = choice.get("logprobs")
        if isinstance(lp, dict) and isinstance(lp.get("content"), list):
            if self.logprobs is None:
                self.logprobs = []
            self.logprobs.extend(x for x in lp["content"] if isinstance(x, dict))
        finish = choice.get("finish_reason")
        if finish is not None and type(finish) is not str:  # an object, a number: unreadable, never kept as text
            self.issues.append("malformed_finish_reason")
        if finish:
            fr = finish if type(finish) is str else _finish_str(finish)
            if self.finish is not None and self.finish != fr:
                self.issues.append("finish_reason_changed")
            self.finish = fr
        if seen_token:
            if self.ttft is None:
                self.ttft = t
            self.times.append(t)

    def _call_index(self, tc: dict) -> int:
        """Which call a tool-call delta belongs to: its ``index``; without one (some providers omit it on parallel
        calls), the call the previous delta went to, unless this delta starts another call: it brings an ``id``
        other than that call's, or a name once that call already has a name and arguments. Merging such deltas
        made one garbage call (``get_weatherget_time``) scored as the model's invalid call."""
        idx = tc.get("index")
        if isinstance(idx, int) and not isinstance(idx, bool) and 0 <= idx < 1024:
            return idx
        self.issues.append("tool_call_delta_without_index")
        if self.last_call is None:
            return 0
        current = self.calls[self.last_call]
        tid = tc.get("id") if isinstance(tc.get("id"), str) else None
        fn = tc.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        same_id = bool(tid) and tid == current["id"]
        new_id = bool(tid) and current["id"] is not None and not same_id
        new_name = isinstance(name, str) and bool(name and current["name"] and current["arguments"]) and not same_id
        if new_id or new_name:
            return max(self.calls) + 1  # bounded by the deltas sent, themselves bounded by the response cap
        return self.last_call

    def result(self, status: int) -> dict:
        calls = [{"index": i, "id": a["id"], "type": a["type"] or "function", "name": a["name"],
                  "arguments": _join_text(a["arguments"]), "name_last_delta": a.get("name_last_delta")}
                 for i, a in sorted(self.calls.items())]
        self.issues += [f"tool_call_name_split:{c['index']}" for c in calls if c["name_last_delta"] is not None]
        content = _join_text(self.content) if self.content else None
        reasoning = _join_text(self.reasoning) if self.reasoning else None
        issues = self.issues + _finish_issues(self.finish, calls) + _tool_call_issues(calls)
        issues += [f"tool_call_arguments_too_deep:{c['index']}" for c in calls if too_deep(c["arguments"])]
        if not self.done:
            issues.append("no_done")
        if self.usage is None:
            issues.append("stream_missing_usage")
        msg: dict[str, Any] = {"role": self.role or "assistant", "content": content}
        if calls:
            msg["tool_calls"] = [{"id": c["id"], "type": c["type"],
                                  "function": {"name": c["name"], "arguments": c["arguments"]}}
                                 for c in calls]
        if reasoning is not None:
            msg["reasoning_content"] = reasoning
        response = {**self.meta, "object": "chat.completion",
                    "choices": [{"index": 0, "message": msg, "finish_reason": self.finish,
                                 "logprobs": {"content": self.logprobs} if self.logprobs is not None else None}]}
        if self.usage is not None:
            response["usage"] = self.usage
        out = {"status": status, "response": response, "content": content, "reasoning_content": reasoning,
               "finish_reason": self.finish, "tool_calls": calls, "usage": _usage_dict(self.usage),
               "logprobs": self.logprobs, "wire_issues": issues, "ttft_s": self.ttft, "chunk_times_s": self.times}
        if self.chunks == 0:
            # A 200 stream with no completion chunk at all (every data line garbage, or only [DONE]) is a provider
            # fault: scoring it as "the model called no tool" would charge the model for the provider's bytes.
            out.update(error_class="malformed_response",
                       error_message=f"stream carried no completion chunk ({self.events} data lines, none usable)")
        return _classify_shape(out)
