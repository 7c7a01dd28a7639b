"""K2-Vendor-Verifier's tool-call schema rule, as MoonshotAI publishes it, so our counts compare with its tables.

Why a module of its own: users put our ``k2vv_schema_accuracy`` next to K2VV's published tables, so it must
follow K2VV's rule on every input, including the odd ones (empty ``parameters``, ``""`` arguments, a bad
schema), where our own ``schema_accuracy`` deliberately differs. The rule, from K2VV's README
("ToolCall-Schema Accuracy") and its validator:

- a reply is a *tool-call reply* when its ``finish_reason`` is ``"tool_calls"``
  (``count_finish_reason_tool_calls``);
- it is *successful* (``count_successful_tool_call``) when it has at least one tool call and every call
  1. names a tool offered in the request (the first offered tool of that name; a malformed tool entry met
     while searching makes the call invalid),
  2. whose ``function.parameters`` is present and truthy (``{}``, ``false`` or a missing key: invalid),
  3. whose arguments parse as JSON (a string goes through ``json.loads`` as is, so ``""`` is invalid; an
     already-decoded value is used directly),
  4. and pass ``jsonschema.validate``: the draft from ``$schema`` (2020-12 by default), no ``format``
     checks, the schema itself checked against its metaschema (an invalid schema makes the call invalid);
     any other error during the check also makes the call invalid;
- ``schema_accuracy = count_successful_tool_call / count_finish_reason_tool_calls``; a tool-call reply with
  no calls counts in the denominator only.

:class:`K2VVSummary` also carries the rest of the ``summary.json`` K2VV writes, under K2VV's own key names, so
a user can diff the two files. Exchanges that failed (transport or HTTP errors, as our client classifies
them) count in ``failure_count`` and have no finish reason, as in K2VV; a streamed reply that ended without a
finish reason counts as ``stop``, as K2VV's stream reassembly does.

Non-streamed calls are judged from the stored body as the provider sent it (``null`` or object arguments, a
malformed entry), because the typed record normalises exactly the inputs where K2VV's verdict would change.
Streamed calls are judged as our client reassembled them (OpenAI's delta semantics), except a tool *name* split
over several deltas: K2VV's reassembly keeps only the last piece (``ToolCall.name_last_delta``), so that is the
name judged here, while our own metrics read the joined name.

Replies K2VV's client (the openai SDK, which builds its objects without validating them) reads differently from
ours, followed here as K2VV does (README, "K2VV's counts"):

- a 200 body with ``choices: []`` (or ``null``, or none): ours a provider fault (``malformed_response``); K2VV a
  success with no finish reason, in no ``finish_*`` count;
- a 200 body whose first choice is a ``tool_calls`` reply with ``message: null`` (or a first choice that is not an
  object): K2VV's judging raises, and its loop drops the line from every count (:func:`dropped`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from verifier.kinds.toolcall import tool_schemas
from verifier.records import ExchangeRecord, ToolCall

_NOT_FOUND = object()


def _offered_parameters(tools: Any, name: str | None) -> Any:
    """The first offered tool's ``parameters`` for ``name``; ``_NOT_FOUND`` when it cannot be found.

    Malformed entries met before a match (not an object, no ``function`` object, no ``name``) end the search
    with nothing found, as a lookup error would in K2VV's validator; so does a matching tool without
    ``parameters``.
    """
    if not isinstance(tools, list):
        return _NOT_FOUND
    for t in tools:
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or "name" not in fn:
            return _NOT_FOUND
        if fn["name"] == name:
            return fn.get("parameters", _NOT_FOUND)
    return _NOT_FOUND


def entry_valid(entry: Any, tools: Any) -> bool:
    """K2VV's verdict on one ``tool_calls`` entry as the provider sent it (not an object, no ``function``
    object, or a missing ``name`` or ``arguments`` key: invalid, as the lookup fails in K2VV's validator)."""
    fn = entry.get("function") if isinstance(entry, dict) else None
    if not isinstance(fn, dict) or "name" not in fn or "arguments" not in fn:
        return False
    return call_valid(fn["name"], fn["arguments"], tools)


def call_valid(name: str | None, arguments: Any, tools: Any) -> bool:
    """K2VV's verdict on one call against the request's ``tools`` list (as sent)."""
    schema = _offered_parameters(tools, name)
    if schema is _NOT_FOUND or not schema:
        return False
    text = arguments if isinstance(arguments, str) else None
    if text is not None:
        try:
            arguments = json.loads(text)
        except Exception:  # noqa: BLE001 - not JSON (or nested past the parser's depth): invalid
            return False
    if tool_schemas.schema_problem(schema) is not None:
        return False
    # valid when the validator finds no error (K2VV: best_match(...) is None); any failure of the validator itself
    # (e.g. an unresolvable $ref) counts as invalid, as in K2VV. Memoised by the argument text.
    return tool_schemas.first_error(schema, arguments, text).valid


def reply_valid(calls: Iterable[ToolCall], tools: Any) -> bool:
    """A tool-call reply is valid when it has at least one call and every call is valid."""
    calls = list(calls)
    return bool(calls) and all(call_valid(c.name, c.arguments, tools) for c in calls)


def _sent_entries(record: ExchangeRecord) -> list[Any] | None:
    """The ``tool_calls`` entries of a non-streamed reply exactly as sent, when the stored body has them.

    Why: the typed record normalises what K2VV reads raw (``null`` arguments become ``""``, an object becomes
    its JSON text, a malformed entry is dropped with a wire issue), and on those inputs K2VV's verdict differs.
    A streamed reply has no such body: K2VV reassembles deltas into strings too, so the typed calls are used; so are
    calls the client left out of the stored body because the typed record holds them unchanged.
    """
    choice = None if record.stream else _first_choice(record)
    msg = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(msg, dict):
        return None
    if "tool_calls" not in msg:  # stored once: the client keeps in the body only calls its extraction changed
        return None
    entries = msg.get("tool_calls")
    return entries if isinstance(entries, list) else []


def record_valid(record: ExchangeRecord, tools: Any) -> bool:
    """K2VV's verdict on one exchange's calls (meaningful when its finish reason is ``tool_calls``)."""
    entries = _sent_entries(record)
    if entries is None:
        calls = list(record.tool_calls)
        return bool(calls) and all(call_valid(c.name if c.name_last_delta is None else c.name_last_delta,
                                              c.arguments, tools) for c in calls)
    return bool(entries) and all(entry_valid(e, tools) for e in entries)


@dataclass
class K2VVSummary:
    """The counts of K2VV's ``summary.json``, under its key names (``finish_tool_calls`` is the README's
    ``count_finish_reason_tool_calls``, ``successful_tool_call_count`` its ``count_successful_tool_call``)."""

    success_count: int = 0
    failure_count: int = 0
    finish_stop: int = 0
    finish_tool_calls: int = 0
    finish_others: int = 0
    finish_others_detail: dict[str, int] = field(default_factory=dict)
    schema_validation_error_count: int = 0
    successful_tool_call_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def answered(record: ExchangeRecord) -> bool:
    """Whether K2VV's client would have received this exchange as a completion.

    Our client classifies a 200 body of the wrong shape (e.g. a tool-call entry that is not an object) as the
    provider fault ``malformed_response``; the openai SDK K2VV uses builds its response objects without
    validation, so K2VV receives such a body as a completion and judges its calls. The K2VV counts follow K2VV.
    """
    if record.ok:
        return True
    if record.error_class != "malformed_response" or record.status != 200 or not isinstance(record.response, dict):
        return False
    choices = record.response.get("choices")
    return not choices or _first_choice(record) is not None  # no choices at all: a success with no finish reason


def dropped(record: ExchangeRecord) -> bool:
    """Whether K2VV's client raises while judging this reply, so that K2VV's loop leaves it out of every count.

    K2VV reads ``response["choices"][0]`` then ``choice.get("message", {}).get("tool_calls", [])`` for a
    ``tool_calls`` reply: a first choice that is not an object, or a ``message`` that is present but not an object
    (``null`` is the shape seen), raises ``AttributeError`` there.
    """
    if record.stream or record.status != 200 or not isinstance(record.response, dict) or record.error_class not in (
            None, "malformed_response"):
        return False
    choices = record.response.get("choices")
    if not isinstance(choices, list) or not choices:
        return False
    choice = choices[0]
    if not isinstance(choice, dict):
        return True
    return choice.get("finish_reason") == "tool_calls" and "message" in choice and not isinstance(
        choice["message"], dict)


def _first_choice(record: ExchangeRecord) -> dict[str, Any] | None:
    if not isinstance(record.response, dict):
        return None
    choices = record.response.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    return choice if isinstance(choice, dict) else None


def finish_reason(record: ExchangeRecord) -> str | None:
    """The finish reason K2VV would have recorded for this exchange (None for a failed one)."""
    if not answered(record):
        return None
    if not record.ok:  # a malformed body K2VV would still have read: its finish reason as sent
        fr = (_first_choice(record) or {}).get("finish_reason")
        if not fr and record.stream:
            return "stop"  # K2VV's stream reassembly: finish_reason or "stop"
        return fr if isinstance(fr, str) else None
    if record.finish_reason is None and record.stream:
        return "stop"
    return record.finish_reason


def summarise(records: Iterable[ExchangeRecord], tools_by_case: dict[str, Any]) -> K2VVSummary:
    """K2VV's summary over ``records``; ``tools_by_case`` maps case id -> the ``tools`` list sent with it."""
    s = K2VVSummary()
    others: Counter[str] = Counter()
    for r in records:
        if dropped(r):
            continue
        if answered(r):
            s.success_count += 1
        else:
            s.failure_count += 1
        fr = finish_reason(r)
        if fr == "stop":
            s.finish_stop += 1
        elif fr == "tool_calls":
            s.finish_tool_calls += 1
            if record_valid(r, tools_by_case.get(r.case_id, [])):
                s.successful_tool_call_count += 1
            else:
                s.schema_validation_error_count += 1
        elif fr:
            s.finish_others += 1
            others[fr] += 1
    s.finish_others_detail = dict(sorted(others.items()))
    return s
