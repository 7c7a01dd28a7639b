"""``verifier run --dry-run``: what the run would send and cost, per endpoint and suite, with nothing sent.

Two figures per row. ``usd`` is the expectation: prompt tokens counted with the endpoint's tokenizer where it is
known (``--option tokenizer=DIR``, or the built-in engine's own), else estimated at 4 characters a token (or the
history's mean); completion tokens are the mean per request of the same suite (content hash) on the same endpoint
name in indexed runs, else a stated default per suite kind; the request count is the history's mean per run where
there is one. ``usd_high`` is the bound the budget ledger reserves (:mod:`verifier.http.spend`): every request
sent (agents: every step of the step budget), every prompt at its byte bound, every reply at ``max_tokens``, each
request billed once (a retry is billed only where the provider reports usage for it, which the bound leaves out).
The claims probes an endpoint will be sent (``response_format``, ``--probe-context``) are rows of their own
(:mod:`verifier.run.probe_plan`).

The history is read by the caller (``verifier.cli``: ``verifier.run`` never imports the history package) and
passed in as a lookup.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from verifier.http.client import wire_json
from verifier.http.spend import prompt_token_bound, uncached_usd, worst_case_usd
from verifier.records import Price
from verifier.run.cost import PLAN_NAME
from verifier.run.dry_run_rows import PlanRow
from verifier.run.probe_plan import probe_rows
from verifier.run.progress import Progress
from verifier.run.protocol import RunContext
from verifier.run.request_plan import PlannedRequest
from verifier.run.runner import RunSettings, kind_options, plan_run
from verifier.run.store import RecordStore

#: Completion tokens per request assumed without history, by suite kind (capped by each request's max_tokens).
DEFAULT_COMPLETION_TOKENS = {"toolcall": 48, "agent": 96, "cache": 4, "logprob": 32}
CHARS_PER_TOKEN = 4.0  # the stated estimate where no tokenizer is known
#: Tokens an agent step adds to the next prompt besides the reply: the tool result (estimate) / its bound.
TOOL_RESULT_TOKENS, TOOL_RESULT_BOUND = 64, 1024


class HistoryMeans(Protocol):
    """What the history knows of a suite on an endpoint (``verifier.history.SuiteCostMeans``)."""

    runs: int
    requests: int
    prompt_tokens: float
    completion_tokens: float


HistoryLookup = Callable[[str, str], "HistoryMeans | None"]  # (suite content hash, endpoint name)


class EndpointPlan(BaseModel):
    requests: int
    usd: float
    usd_high: float
    priced: bool


class CostPlan(BaseModel):
    """``plan.json``: the keys of docs/cli.md ("Cost and budget") plus the per-suite rows."""

    endpoints: dict[str, EndpointPlan]
    usd: float
    usd_high: float
    rows: list[PlanRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


@dataclass
class _Counter:
    """Prompt tokens of a body: a local tokenizer, or characters / 4."""

    tokenizer: Any | None
    label: str

    def count(self, body: dict[str, Any]) -> float:
        if self.tokenizer is not None:
            try:
                if "prompt" in body:
                    return float(self.tokenizer.count_text(str(body["prompt"])))
                return float(self.tokenizer.count_chat(body.get("messages") or [], body.get("tools")))
            except Exception:  # noqa: BLE001 - a template that cannot render this body: fall back to the estimate
                pass
        return len(json.dumps({k: body.get(k) for k in ("prompt", "messages", "tools") if body.get(k)})) \
            / CHARS_PER_TOKEN


def _tokenizer(settings: RunSettings, source: str) -> _Counter:
    """The tokenizer a dry run counts with for one endpoint, and how the table names it."""
    from verifier.kinds.cache.token_accounting import LocalTokenizer, TokenizerUnavailable

    folder: Path | None = None
    if settings.options.get("tokenizer"):
        folder = Path(str(settings.options["tokenizer"]))
    elif source.startswith("builtin:"):
        import reference_engine

        model = source[len("builtin:"):].partition("?")[0]
        folder = (Path(reference_engine.__file__).parent / "models" / "verifier-tiny") if model == "tiny" \
            else Path(model)
    if folder is not None and (folder / "tokenizer.json").is_file():
        try:
            return _Counter(LocalTokenizer(folder), f"tokenizer {folder.name}")
        except TokenizerUnavailable:
            pass
    return _Counter(None, f"estimate: {CHARS_PER_TOKEN:g} characters a token")


def _row(endpoint: str, suite_name: str, kind: str, planned: list[PlannedRequest], counter: _Counter,
         price: Price | None, history: HistoryMeans | None) -> PlanRow:
    n = sum(p.count for p in planned)
    default_completion = DEFAULT_COMPLETION_TOKENS.get(kind, 48)
    if history is not None:
        completion = history.completion_tokens
        completion_source = f"history: mean of {history.requests} replies in {history.runs} run(s)"
    else:
        completion = float(default_completion)
        completion_source = f"default for {kind}: {default_completion} a reply (max_tokens caps it)"
    prompt_total = completion_total = high = 0.0
    base_cache: dict[int, tuple[float, int]] = {}
    for p in planned:
        key = id(p.body)
        if key not in base_cache:
            base_cache[key] = (counter.count(p.body), prompt_token_bound(wire_json(p.body)))
        base, bound = base_cache[key]
        reply = min(completion, float(p.max_tokens))
        prompt_total += p.count * (base + p.earlier_turns * (reply + TOOL_RESULT_TOKENS))
        completion_total += p.count * reply
        if price is not None:
            high += p.count * worst_case_usd(bound + p.earlier_turns * (p.max_tokens + TOOL_RESULT_BOUND),
                                             p.max_tokens, price)
    prompt_source = counter.label
    expected = float(n)
    if history is not None and n:
        # the history knows how many requests a run of this suite really took (agents stop before their budget)
        expected = history.requests / max(history.runs, 1)
        scale = expected / n
        completion_total = expected * completion
        if counter.tokenizer is None:
            prompt_total, prompt_source = expected * history.prompt_tokens, "history: mean reported prompt tokens"
        else:
            prompt_total *= scale
    usd = None
    if price is not None:
        usd = uncached_usd(prompt_total, completion_total, price)
    return PlanRow(endpoint=endpoint, suite=suite_name, kind=kind, requests=n, expected_requests=expected,
                   prompt_tokens=prompt_total, completion_tokens=completion_total, usd=usd,
                   usd_high=high if price is not None else None, prompt_source=prompt_source,
                   completion_source=completion_source)


def dry_run(settings: RunSettings, history: HistoryLookup | None = None) -> tuple[Path, CostPlan]:
    """Check every input as a run would (nothing sent), price the plan, write ``plan.json`` in the run folder."""
    with contextlib.ExitStack() as held:
        plan = plan_run(settings, held)
        ctx = RunContext(run_dir=plan.run_dir, store=RecordStore(plan.run_dir / "records.jsonl", read_only=True),
                         clients={}, reference=plan.endpoints.reference, candidates=plan.endpoints.candidates,
                         repeats=settings.repeats, seed=settings.seed, progress=Progress(display=False),
                         options=kind_options(settings))
        rows: list[PlanRow] = []
        notes: list[str] = []
        for e in plan.endpoints.endpoints:
            counter = _tokenizer(settings, plan.endpoints.sources.get(e.name, e.base_url))
            for _, kind, suite in plan.loaded:
                planner = getattr(kind, "planned_requests", None)
                if planner is None:
                    notes.append(f"suite '{suite.manifest.name}': its kind lists no requests; not priced")
                    continue
                planned = [p for p in planner(suite, ctx)
                           if not p.reference_only or e.name == plan.endpoints.reference]
                means = history(suite.manifest.content_hash, e.name) if history is not None else None
                rows.append(_row(e.name, suite.manifest.name, kind.kind, planned, counter, e.price, means))
            rows += probe_rows(e, counter, settings.probe_context)  # the claims probes it will be sent
        endpoints = {}
        for e in plan.endpoints.endpoints:
            mine = [r for r in rows if r.endpoint == e.name]
            endpoints[e.name] = EndpointPlan(requests=sum(r.requests for r in mine),
                                             usd=sum(r.usd or 0.0 for r in mine),
                                             usd_high=sum(r.usd_high or 0.0 for r in mine), priced=e.price is not None)
            if e.price is None:
                notes.append(f"endpoint '{e.name}' has no price: its usd is 0 (give it price = {{ input, output }})")
        result = CostPlan(endpoints=endpoints, usd=sum(p.usd for p in endpoints.values()),
                          usd_high=sum(p.usd_high for p in endpoints.values()), rows=rows, notes=notes)
        (plan.run_dir / PLAN_NAME).write_text(result.model_dump_json(indent=2) + "\n")
        return plan.run_dir, result
