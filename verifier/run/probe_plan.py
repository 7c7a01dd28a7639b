"""The claims probes in ``verifier run --dry-run``'s plan: what the ``response_format`` and context probes will send.

Why apart from the suites' rows: the probes are not suites (no kind lists them) but they are requests the run
pays for, sent only when an endpoint states the claim they check:

* the ``response_format`` probe (:mod:`verifier.run.format_probe`): its 3 JSON-mode requests, to each endpoint
  whose ``claims.supported_parameters`` lists ``response_format``, each capped at its ``max_tokens``;
* the context probe (:mod:`verifier.run.context_probe`, only with ``--probe-context``): two small sizing requests
  and one near ``FILL`` of the stated ``claims.context_length``, each with ``max_tokens`` 1, to each endpoint that
  states one. The large request is the costly one: its expected prompt is the probe's target (it aims there);
  its bound is that of a prompt of as many words as target tokens (every word is at least one token, so the real
  request, sized from the sizing replies, has fewer words).

``usd_high`` bounds each the way the budget ledger reserves a request (:func:`verifier.http.spend.worst_case_usd`).
"""

from __future__ import annotations

from typing import Any, Protocol

from verifier.http.client import wire_json
from verifier.http.spend import prompt_token_bound, uncached_usd, worst_case_usd
from verifier.records import EndpointConfig
from verifier.run import context_probe, format_probe
from verifier.run.dry_run_rows import PlanRow


class TokenCounter(Protocol):
    """How the dry run counts a body's prompt tokens for an endpoint, and how its table names the method."""

    label: str

    def count(self, body: dict[str, Any]) -> float: ...

#: Completion tokens a ``response_format`` probe reply is expected to take without history: a small JSON object.
FORMAT_REPLY_TOKENS = 32


def _row(endpoint: str, name: str, parts: list[tuple[float, float, int, int]], e: EndpointConfig,
         prompt_source: str, completion_source: str) -> PlanRow:
    """``parts``: per request (expected prompt tokens, expected completion tokens, prompt bound, max_tokens)."""
    prompt = sum(p for p, _, _, _ in parts)
    completion = sum(c for _, c, _, _ in parts)
    price = e.price
    usd = high = None
    if price is not None:
        usd = uncached_usd(prompt, completion, price)
        high = sum(worst_case_usd(bound, cap, price) for _, _, bound, cap in parts)
    return PlanRow(endpoint=endpoint, suite=name, kind="probe", requests=len(parts), expected_requests=len(parts),
                   prompt_tokens=prompt, completion_tokens=completion, usd=usd, usd_high=high,
                   prompt_source=prompt_source, completion_source=completion_source)


def probe_rows(e: EndpointConfig, counter: TokenCounter, probe_context: bool) -> list[PlanRow]:
    """The probe rows of one endpoint (none when it states nothing a probe checks)."""
    rows = []
    claims = e.claims
    if claims is not None and format_probe.PARAMETER in (claims.supported_parameters or []):
        reply = min(FORMAT_REPLY_TOKENS, format_probe.MAX_TOKENS)
        parts = []
        for prompt in format_probe.PROMPTS:
            body = format_probe.body(prompt)
            parts.append((counter.count(body), float(reply), prompt_token_bound(wire_json(body)),
                          format_probe.MAX_TOKENS))
        rows.append(_row(e.name, "response_format probe (claims)", parts, e, counter.label,
                         f"default for the probe: {reply} a reply (max_tokens {format_probe.MAX_TOKENS} caps it)"))
    if probe_context and claims is not None and claims.context_length is not None:
        parts = []
        for words in context_probe.SIZING_WORDS:
            body = context_probe.probe_body(words)
            parts.append((counter.count(body), 1.0, prompt_token_bound(wire_json(body)), 1))
        target = context_probe.target_tokens(claims.context_length)
        widest = context_probe.probe_body(max(1, target))
        parts.append((float(target), 1.0, prompt_token_bound(wire_json(widest)), 1))
        rows.append(_row(e.name, "context probe (--probe-context)", parts, e,
                         f"{counter.label}; the large request at its target, {target:,} tokens",
                         "max_tokens 1 a request"))
    return rows
