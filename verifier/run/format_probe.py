"""The ``response_format`` probe: a few JSON-mode requests to each endpoint that states it supports the parameter.

Why a probe of its own: no suite sends ``response_format`` (the tool-call, agent, logprob and cache suites measure
other things), so a listing's ``supported_parameters = [..., "response_format"]`` had nothing to be read against.
OpenAI's JSON mode promises one thing a client can check without a reference: with
``response_format = {"type": "json_object"}`` the message content parses as a JSON object. Three small requests
(different prompts, each saying "JSON" as OpenAI requires, ``max_tokens`` :data:`MAX_TOKENS`, temperature 0) test
that; the built-in engine implements it by constrained decoding (reference_engine/constraints.py).

Opt-in by claim: only endpoints whose ``claims.supported_parameters`` lists ``response_format`` are asked, so a run
without claims sends nothing extra, and nobody pays for a check of a statement they did not make. The replies land
in ``response_format_probe.json`` in the run folder, never in ``records.jsonl``: they are evidence for a claim, not
suite output, and no suite's score reads them. Each request is classified here (:func:`classify`); the rule that
turns them into ``agrees`` / ``contradicts`` / ``not checked`` is verifier/run/claims.py's.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from verifier.http.client import EndpointClient
from verifier.http.endpoints import EndpointSet
from verifier.records import Exchange, Usage

log = logging.getLogger(__name__)

PARAMETER = "response_format"
PROBES_FILE = "response_format_probe.json"
MAX_TOKENS = 256  # room for a small object; a reply cut here before it closes is inconclusive, not a contradiction
PROMPTS = (
    'Describe a fruit as a JSON object with the keys "name" and "color".',
    'Give a JSON object with the keys "city" and "country" for a city you know.',
    'Answer with a JSON object whose key "answer" holds the sum of 2 and 3.',
)
_SHOWN = 120  # characters of a reply quoted in the evidence
_KEPT = 2000  # characters of each reply kept in the probe file
#: statuses that say nothing about the parameter: authentication, a missing route, a timeout, rate limiting
_NOT_ABOUT_THE_REQUEST = (401, 403, 404, 408, 429)
_NAMES_IT = re.compile(r"response_format|json_object|json mode", re.IGNORECASE)

Outcome = Literal["parsed", "not_json", "truncated", "refused", "rejected", "fault"]


class FormatReply(BaseModel):
    """One request of the probe, classified.

    ``parsed``: the content is a JSON object. ``not_json``: an answer whose content is not one (prose, a list, code
    fences, no content). ``truncated``: an object cut by ``max_tokens`` before it closed (inconclusive).
    ``refused``: a 4xx whose message names ``response_format`` / ``json_object``. ``rejected``: another 4xx
    (inconclusive: it may be about something else in the request). ``fault``: 5xx, timeout, transport failure,
    auth, rate limit, a request never sent (the provider's or the run's trouble, not an answer about the parameter).
    """

    outcome: Outcome
    status: int | None = None
    finish_reason: str | None = None
    detail: str | None = None  # one line: the error, or the start of a reply that did not parse
    content: str | None = None  # the reply as sent (first characters), for whoever audits the probe
    usage: Usage = Field(default_factory=Usage)


class FormatProbe(BaseModel):
    """Every request of one endpoint's probe, in the order of :data:`PROMPTS`."""

    replies: list[FormatReply] = Field(default_factory=list)

    def conclusive(self) -> bool:
        """No request met a fault: sending the probe again (on ``--resume``) could not change what it says."""
        return bool(self.replies) and not any(r.outcome == "fault" for r in self.replies)


class FormatProbes(BaseModel):
    """``response_format_probe.json`` in the run folder: endpoint -> its probe, read when the summary is written."""

    probes: dict[str, FormatProbe] = Field(default_factory=dict)


def body(prompt: str) -> dict:
    """One probe request: JSON mode, a short answer, no sampling noise."""
    return {"messages": [{"role": "user", "content": prompt}], "response_format": {"type": "json_object"},
            "max_tokens": MAX_TOKENS, "temperature": 0}


def _line(ex: Exchange) -> str:
    text = (ex.error_message or ex.error_class or f"HTTP {ex.status}").strip()
    return (text.splitlines() or [""])[0][:300]


def _shown(content: str | None) -> str:
    if content is None:
        return "no content"
    if not content.strip():
        return "empty content"
    one = " ".join(content.split())
    return repr(one if len(one) <= _SHOWN else one[:_SHOWN] + "…")


def classify(ex: Exchange) -> FormatReply:
    """What one exchange says about JSON mode (see :class:`FormatReply` for the outcomes)."""
    kept = ex.content[:_KEPT] if ex.content is not None else None
    if ex.ok:
        try:
            value = json.loads(ex.content) if ex.content is not None else None
        except ValueError:
            value = None
        if isinstance(value, dict):
            outcome: Outcome = "parsed"
        elif ex.finish_reason == "length" and (ex.content or "").lstrip().startswith("{"):
            outcome = "truncated"
        else:
            outcome = "not_json"
        return FormatReply(outcome=outcome, status=ex.status, finish_reason=ex.finish_reason, content=kept,
                           detail=None if outcome == "parsed" else _shown(ex.content), usage=ex.usage)
    status = ex.status
    if status is not None and 400 <= status < 500 and status not in _NOT_ABOUT_THE_REQUEST:
        outcome = "refused" if _NAMES_IT.search(ex.error_message or "") else "rejected"
    else:
        outcome = "fault"
    return FormatReply(outcome=outcome, status=status, detail=_line(ex), usage=ex.usage)


async def probe_json_object(client: EndpointClient) -> FormatProbe:
    """Send the probe's requests one after another; never raises for the endpoint's behaviour."""
    replies = []
    for prompt in PROMPTS:
        reply = classify(await client.chat(body(prompt), stream=False))
        log.info("response_format probe: %s (status %s)", reply.outcome, reply.status)
        replies.append(reply)
    return FormatProbe(replies=replies)


def states_response_format(endpoints: EndpointSet) -> list[str]:
    """The endpoints whose claims list ``response_format``: the only ones the probe is sent to."""
    return [e.name for e in endpoints.endpoints
            if e.claims is not None and PARAMETER in (e.claims.supported_parameters or [])]


async def probe_endpoints(clients: dict[str, EndpointClient], endpoints: EndpointSet, run_dir: Path) -> None:
    """Probe every endpoint that states ``response_format``; a conclusive probe already in the folder (an earlier
    attempt of a ``--resume``d run) is kept rather than paid for again."""
    names = states_response_format(endpoints)
    if not names:
        return
    found = FormatProbes(probes=load_probes(run_dir))
    for name in names:
        kept = found.probes.get(name)
        if kept is None or not kept.conclusive():
            found.probes[name] = await probe_json_object(clients[name])
    (Path(run_dir) / PROBES_FILE).write_text(found.model_dump_json(indent=2), encoding="utf-8")


def load_probes(run_dir: Path) -> dict[str, FormatProbe]:
    """The probes of a run folder; none when no endpoint stated the parameter (or the file is unreadable)."""
    path = Path(run_dir) / PROBES_FILE
    if not path.is_file():
        return {}
    try:
        return FormatProbes.model_validate_json(path.read_text(encoding="utf-8")).probes
    except (OSError, ValueError) as e:
        log.warning("%s: not read (%s); response_format claims stay not checked", path, e)
        return {}
