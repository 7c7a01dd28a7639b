"""What an exchange's fields keep: the response body without what was extracted from it, every string redacted.

Why apart from the client: these shape the record once an attempt is over, and touch no HTTP.
"""

from __future__ import annotations

from typing import Any

from verifier.http import redaction


def redact_fields(ex: dict) -> None:
    """Every string of an exchange, redacted in place (only called when a secret is registered)."""
    for key in ("content", "reasoning_content", "finish_reason"):
        ex[key] = redaction.redact(ex.get(key))
    ex["error_message"] = redaction.redact_message(ex.get("error_message"))
    ex["tool_calls"] = redaction.redact_tree(ex.get("tool_calls") or [])
    ex["response"] = redaction.redact_tree(ex.get("response"))
    ex["logprobs"] = redaction.redact_tree(ex.get("logprobs"))
    ex["wire_issues"] = redaction.redact_tree(ex.get("wire_issues") or [])


def store_once(ex: dict) -> None:
    """Drop from a chat ``response`` what the exchange already holds unchanged in its own fields.

    Why: the message text, tool calls and logprobs were stored twice in every record (once extracted, once
    inside the body), doubling records.jsonl for long or logprob-heavy replies. Anything the extraction
    changed (e.g. arguments that were not a string) stays in ``response``, so nothing the endpoint sent is lost.
    """
    response = ex.get("response")
    if not isinstance(response, dict) or not isinstance(response.get("choices"), list) or not response["choices"]:
        return
    choice = response["choices"][0]
    if not isinstance(choice, dict):
        return
    choice = response["choices"][0] = dict(choice)
    msg = choice.get("message")
    if isinstance(msg, dict):
        msg = choice["message"] = dict(msg)
        if "content" in msg and msg["content"] == ex.get("content"):
            del msg["content"]
        for key in ("reasoning_content", "reasoning"):
            if key in msg and msg[key] == ex.get("reasoning_content"):
                del msg[key]
                break
        if "tool_calls" in msg and _same_calls(msg["tool_calls"], ex.get("tool_calls") or []):
            del msg["tool_calls"]
    lp = choice.get("logprobs")
    if isinstance(lp, dict) and "content" in lp and lp["content"] == ex.get("logprobs"):
        choice["logprobs"] = {k: v for k, v in lp.items() if k != "content"}


def _same_calls(raw: Any, calls: list[dict[str, Any]]) -> bool:
    if not isinstance(raw, list) or len(raw) != len(calls):
        return False
    for r, c in zip(raw, calls):
        fn = r.get("function") if isinstance(r, dict) else None
        if not isinstance(fn, dict) or (r.get("id"), fn.get("name"), fn.get("arguments")) != (
                c.get("id"), c.get("name"), c.get("arguments")) or r.get("type", "function") != c.get("type"):
            return False
    return True
