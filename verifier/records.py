"""Typed records that cross module boundaries.

Every stage of the pipeline (runner -> record store -> scoring -> aggregation -> report/gate/history)
exchanges these pydantic models rather than loose dicts, so a field rename is a type error, not a
silent ``None`` in a report three modules away. Records are serialised one per line to
``records.jsonl``; keep fields additive so old run folders still load.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

RecordKind = Literal["toolcall", "agent_step", "logprob", "cache"]

#: OpenAI's documented finish reasons; anything else is a wire-conformance finding.
OPENAI_FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"})


#: An exchange the run's budget refused before anything was sent (``--budget`` / an endpoint's ``budget``): not a
#: measurement, so the record store does not write it and ``--resume`` sends it later.
BUDGET_REFUSED = "budget_exhausted"


class Price(BaseModel):
    """USD per 1M tokens, as providers list them; ``cached_input`` defaults to ``input`` (no cache discount)."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)


class StatedClaims(BaseModel):
    """What a provider *states* about an endpoint (``claims = {...}`` in the endpoints TOML, or imported from a
    listing such as OpenRouter's). Every key optional; the run checks each against what it measured
    (verifier/run/claims.py), so a statement is never taken on trust nor silently ignored."""

    model_config = ConfigDict(extra="forbid")

    quantization: str | None = None  # weights precision as listed, e.g. "fp8", "int4", "bf16"
    kv_cache: str | None = None  # e.g. "fp8-e4m3", "bf16"
    decode_weights: str | None = None  # weights used on the decode path, e.g. "int4"
    context_length: int | None = Field(None, gt=0)
    supported_parameters: list[str] | None = None  # e.g. ["tools", "tool_choice", "logprobs", "response_format"]
    implicit_caching: bool | None = None


class EndpointConfig(BaseModel):
    """One endpoint under test (or the reference). Holds the *name* of the key's env var, never the key."""

    model_config = ConfigDict(extra="forbid")

    name: str
    base_url: str
    model: str | None = None
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    rate: float | None = None  # requests per second; None = unlimited
    concurrency: int = 8
    # Deadlines of one attempt, in seconds (docs/cli.md "Timeouts"). ``timeout`` is the total: it ends the
    # attempt even while a stream keeps sending (pings included); the retry policy then decides.
    timeout: float = Field(120.0, gt=0)
    connect_timeout: float = Field(10.0, gt=0)  # TCP/TLS connect, and the wait for a pooled connection
    write_timeout: float = Field(30.0, gt=0)  # sending the request body
    read_timeout: float | None = Field(None, gt=0)  # longest silence between bytes; None: only the total bounds it
    max_response_bytes: int = Field(8 * 1024 * 1024, gt=0)  # cap on the body, counted after decompression
    stream: bool = False
    max_attempts: int = 5
    price: Price | None = None  # USD per 1M tokens (docs/cli.md "Cost and budget")
    budget: float | None = Field(None, gt=0)  # USD this endpoint may spend in the run; needs ``price``
    claims: StatedClaims | None = None  # stated by the provider; checked, never sent


class Usage(BaseModel):
    """Token usage normalised across vendors.

    ``cached_tokens is None`` means the endpoint did not report caching at all; ``0`` means it reported
    zero. The two must never be conflated (a structurally zero hit rate looks like a broken one).
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cached_field: str | None = None  # which vendor field carried it, e.g. "prompt_tokens_details.cached_tokens"


class ToolCall(BaseModel):
    """A tool call as the endpoint sent it. ``arguments`` stays the raw string: parsing is scoring's job."""

    index: int = 0
    id: str | None = None
    type: str | None = "function"
    name: str | None = None
    arguments: str = ""
    #: streamed calls whose name came over several deltas: the last fragment (a client that replaces the name on
    #: each delta instead of appending, as K2VV's does, reads only this); None when the name came in one piece
    name_last_delta: str | None = None


#: ``error_class`` of a request the client did not send because its endpoint was stopped (every chat request
#: refused: verifier.http.stopping); the run store does not write such a record, so ``--resume`` sends it
NOT_SENT = "not_sent"


class Exchange(BaseModel):
    """The outcome of one logical request to an endpoint, after retries, as the client saw it."""

    request_hash: str
    attempts: int = 1
    status: int | None = None  # final HTTP status; None when no response arrived
    # e.g. "rate_limited", "server_error", "timeout", "connection", "broken_stream", "client_error", "auth", "not_found"
    error_class: str | None = None
    # ... and "provider_error" (a 200 body that reports an error), "malformed_response" (a 200 with no readable
    # completion), "harness_error" (an exception while handling this exchange: recorded, the suite goes on),
    # "probe_failed" (a logprob capability probe met provider faults)
    error_message: str | None = None
    # per retry, the HTTP status behind it (0: timeout, connection, broken stream, provider error)
    retried_statuses: list[int] = Field(default_factory=list)
    # times the request was sent again at once, uncounted in ``attempts``, because a reused keep-alive connection
    # closed before any response byte (the server never read it; rule in verifier/http/stack.py)
    resent_undelivered: int = 0
    stream: bool = False
    ttft_s: float | None = None
    latency_s: float | None = None
    # arrival times of content/tool-call chunks, from request start
    chunk_times_s: list[float] = Field(default_factory=list)
    response: dict[str, Any] | None = None  # final body (for streams: reassembled as a non-streamed completion)
    content: str | None = None
    reasoning_content: str | None = None
    finish_reason: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    logprobs: list[dict[str, Any]] | None = None  # OpenAI-style logprobs.content entries when requested
    wire_issues: list[str] = Field(default_factory=list)  # conformance findings, e.g. "unknown_finish_reason:foo"
    #: usage reported by attempts that were retried (a provider may bill a reply the client could not use)
    retried_usage: list[Usage] = Field(default_factory=list)
    #: USD the run's budget ledger settled for this exchange (all attempts; the reservation where no usage came);
    #: None when no budget applied. ``--resume`` starts its ledger from the sum of these.
    charged_usd: float | None = None

    @property
    def ok(self) -> bool:
        return self.error_class is None and self.status is not None and 200 <= self.status < 300


class ExchangeRecord(Exchange):
    """An :class:`Exchange` plus where it belongs: one line of ``records.jsonl``."""

    kind: RecordKind
    suite: str
    case_id: str
    repeat: int = 0
    endpoint: str
    step: int | None = None  # agent suites: step index within a trial (repeat = trial)
    variant: str | None = None  # e.g. "stream" / "nonstream" when a case is run both ways
    extra: dict[str, Any] = Field(default_factory=dict)
    timestamp: float = Field(default_factory=time.time)

    def key(self) -> tuple[str, str, str, int, int | None, str | None]:
        """Identity used by ``--resume``: an exchange recorded under this key is not sent again."""
        return (self.suite, self.case_id, self.endpoint, self.repeat, self.step, self.variant)


class SuiteManifest(BaseModel):
    """What exactly a result ran: a suite is named by its content hash, not just its name."""

    name: str
    version: str
    kind: Literal["toolcall", "agent", "logprob", "cache"]
    case_count: int
    content_hash: str  # sha256 of the canonical case data
    source: str | None = None  # path or "builtin"
    skipped_lines: int = 0


class Interval(BaseModel):
    """A point estimate with its 95% interval and denominator: every figure a user sees is one of these."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    method: str | None = None  # "wilson", "bootstrap", "newcombe", ...


_Model = TypeVar("_Model", bound=BaseModel)


def read_json_model(model: type[_Model], path: Path, *, missing: str, unreadable: str,
                    error: type[Exception] = ValueError) -> _Model:
    """``model`` parsed from the JSON file at ``path``; a missing or malformed file is one ``error`` line naming it
    (``{path}: {missing}`` or ``{path}: {unreadable} (first line of the parse error)``), never a traceback."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: {missing}")
    try:
        return model.model_validate_json(path.read_bytes())
    except ValueError as e:
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise error(f"{path}: {unreadable} ({first})") from None
