"""The ``toolcall`` suite kind: load a JSONL suite, replay every case against every endpoint, score.

Plugs into the run through the SuiteKind protocol (``verifier/run/runner.py``): ``load`` -> ``run`` (appends
one :class:`ExchangeRecord` per exchange, skipping keys already on disk so ``--resume`` never sends an
exchange twice) -> ``score`` (delegates to :mod:`verifier.kinds.toolcall.scoring`).

Variants: a suite may ask for each case to run both streamed and non-streamed (``toolcall-schemas`` does;
any suite can via ``options["variants"] = "both"``), because streaming-only tool-call bugs are a known
failure class and the two must be comparable side by side. Otherwise each case runs once per repeat,
streamed or not as ``--stream/--no-stream`` says, else as the line's own ``stream`` value says, else as
the endpoint's configuration says. An explicit ``--stream/--no-stream`` also narrows a both-ways suite to
that one variant.

Reference repeats: the reference answers a seeded share of the cases (every variant) once more, recorded under
``repeat = --repeats`` with ``extra["reference_repeat_of"] = 0``; they measure the reference's own run-to-run
agreement, the floor its twin would reach (:mod:`verifier.kinds.toolcall.reference_repeats`). Their requests carry
a distinct ``user`` field (:func:`~verifier.kinds.toolcall.reference_repeats.repeat_body`) so a response cache keyed
on the body cannot answer them with the first reply; the first requests are sent exactly as before.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.http.spend import request_max_tokens
from verifier.kinds.toolcall import reference_repeats
from verifier.kinds.toolcall.scoring import score_toolcall
from verifier.kinds.toolcall.sequential_units import toolcall_units
from verifier.kinds.toolcall.suite_format import LoadedSuite, content_hash, load_jsonl
from verifier.records import ExchangeRecord
from verifier.run.exchange_guard import failed_exchange, guarded
from verifier.run.protocol import RunContext
from verifier.run.request_plan import PlannedRequest
from verifier.run.sequential import HeadlineUnits
from verifier.run.sequential_floor import FloorHeadlineUnits
from verifier.run.summary import EndpointSuiteResult

BOTH_VARIANTS: tuple[str, str] = ("nonstream", "stream")


@dataclass
class ToolcallSuite(LoadedSuite):
    """A loaded tool-call suite plus how to run it (variants to send for each case)."""

    variants: tuple[str | None, ...] = (None,)
    stream_override: bool | None = None  # --stream/--no-stream: beats a line's own "stream"
    limit: int | None = None
    total_cases: int = 0
    #: cases the reference answers twice, chosen on the whole (limited) suite before any --shard split
    reference_repeat_ids: frozenset[str] = frozenset()


def _limit(options: dict[str, Any]) -> int | None:
    raw = options.get("limit")
    if raw in (None, "", 0):
        return None
    try:
        n = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"option limit: expected a positive integer, got {raw!r}") from None
    if n <= 0:
        raise ValueError(f"option limit: expected a positive integer, got {raw!r}")
    return n


def _variants(options: dict[str, Any], default: tuple[str | None, ...]) -> tuple[str | None, ...]:
    v = options.get("variants")
    if v in (None, ""):
        return default
    if v == "both":
        return BOTH_VARIANTS
    if v in ("stream", "nonstream"):
        return (v,)
    if v == "default":
        return (None,)
    raise ValueError(f"option variants: expected both, stream, nonstream or default, got {v!r}")


def load_toolcall_suite(path: str | Path, *, name: str | None = None, version: str = "1",
                        options: dict[str, Any] | None = None,
                        default_variants: tuple[str | None,
                                                ...] = (None,), source_label: str | None = None) -> ToolcallSuite:
    """Load a JSONL suite and apply run options (``limit``, ``variants``, ``strict``)."""
    options = options or {}
    base = load_jsonl(path, name=name, version=version, strict=bool(options.get("strict")), source_label=source_label)
    limit = _limit(options)
    cases = base.cases[:limit] if limit else base.cases
    manifest = base.manifest
    if limit and limit < len(base.cases):
        # The manifest names exactly what ran: the hash covers the subset, the source says so.
        manifest = manifest.model_copy(update={
            "case_count": len(cases), "content_hash": content_hash(cases),
            "source": f"{manifest.source} (first {len(cases)} of {len(base.cases)} cases)"})
    stream = options.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ValueError(f"option stream: expected true or false, got {stream!r}")
    variants = _variants(options, default_variants)
    if stream is not None and "variants" not in options and variants == BOTH_VARIANTS:
        variants = ("stream",) if stream else ("nonstream",)  # an explicit --stream/--no-stream wins
    repeat_ids = reference_repeats.choose([c.id for c in cases], reference_repeats.share_option(options),
                                          int(options.get("seed", 0) or 0))
    return ToolcallSuite(manifest=manifest, cases=cases, problems=base.problems, variants=variants,
                         stream_override=stream, limit=limit, total_cases=len(base.cases),
                         reference_repeat_ids=repeat_ids)


class ToolcallKind:
    """SuiteKind for tool-call suites."""

    kind = "toolcall"

    def load(self, ref: str, options: dict[str, Any]) -> ToolcallSuite:
        """``ref`` is a path to a JSONL file (built-in names are resolved by ``suite_registry``)."""
        return load_toolcall_suite(ref, options=options)

    @staticmethod
    def _repeats(ctx: RunContext) -> int:
        return max(1, int(getattr(ctx, "repeats", 1) or 1))

    @staticmethod
    def _repeated(suite: ToolcallSuite) -> list[Any]:
        return [c for c in suite.cases if c.id in suite.reference_repeat_ids]

    def planned_exchanges(self, suite: ToolcallSuite, ctx: RunContext) -> int:
        return len(suite.variants) * (len(suite.cases) * self._repeats(ctx) * len(ctx.endpoints)
                                      + len(self._repeated(suite)))

    def planned_requests(self, suite: ToolcallSuite, ctx: RunContext) -> list[PlannedRequest]:
        """Each case's body, sent once per variant and repeat by every endpoint (``--dry-run`` prices them), and
        once more per variant by the reference alone for each case it answers twice."""
        n = len(suite.variants) * self._repeats(ctx)
        every = [PlannedRequest(body=case.body, count=n, max_tokens=request_max_tokens(case.body))
                 for case in suite.cases]
        again = [PlannedRequest(body=reference_repeats.repeat_body(case.body), count=len(suite.variants),
                                max_tokens=request_max_tokens(case.body), reference_only=True)
                 for case in self._repeated(suite)]
        return every + again

    def _todo(self, suite: ToolcallSuite, ctx: RunContext) -> list[tuple[str, Any, int, str | None, bool]]:
        """Pending exchanges as (endpoint, case, repeat, variant, is a reference repeat); the reference's second
        answers come last, under repeat index ``--repeats``."""
        done = ctx.store.done_keys()
        name = suite.manifest.name
        todo = []
        for repeat in range(self._repeats(ctx)):
            for case in suite.cases:
                for variant in suite.variants:
                    for endpoint in ctx.endpoints:
                        if (name, case.id, endpoint, repeat, None, variant) not in done:
                            todo.append((endpoint, case, repeat, variant, False))
        again = self._repeats(ctx)
        for case in self._repeated(suite):
            for variant in suite.variants:
                if (name, case.id, ctx.reference, again, None, variant) not in done:
                    todo.append((ctx.reference, case, again, variant, True))
        return todo

    def pending(self, suite: ToolcallSuite, ctx: RunContext) -> int:
        """Exchanges of ``suite`` not yet on disk (``--sequential`` skips a batch that ``--resume`` finds done)."""
        return len(self._todo(suite, ctx))

    def sequential_units(self, suite: ToolcallSuite, order: list[str], records: list[ExchangeRecord],
                         reference: str, candidate: str) -> list[HeadlineUnits | FloorHeadlineUnits]:
        """The candidate's headlines as per-case units in the run's case order (``--sequential``); trigger F1 and
        argument agreement against the reference's floor when it answers some cases twice."""
        return toolcall_units(suite.cases, order, records, reference, candidate,
                              repeats=bool(suite.reference_repeat_ids))

    async def run(self, suite: ToolcallSuite, ctx: RunContext) -> None:
        """Send every pending exchange; the clients enforce rate and concurrency limits."""
        todo = self._todo(suite, ctx)
        skipped = self.planned_exchanges(suite, ctx) - len(todo)
        if skipped > 0:  # already on disk from an earlier, interrupted run: count them with their errors/retries
            ctx.progress.advance_resumed(r for r in ctx.store.read(kind="toolcall", suite=suite.manifest.name)
                                         if r.endpoint in ctx.endpoints)
        await asyncio.gather(*(self._one(suite, ctx, *item) for item in todo))

    async def _one(self, suite: ToolcallSuite, ctx: RunContext, endpoint: str, case: Any, repeat: int,
                   variant: str | None, reference_repeat: bool) -> None:
        if variant is not None:
            stream: bool | None = variant == "stream"
        else:
            stream = suite.stream_override if suite.stream_override is not None else case.stream
        body = reference_repeats.repeat_body(case.body) if reference_repeat else case.body
        ex = await guarded(ctx.clients[endpoint].chat(body, stream=stream), body, stream=bool(stream))
        where: dict[str, Any] = {"kind": "toolcall", "suite": suite.manifest.name, "case_id": case.id, "repeat": repeat,
                                 "endpoint": endpoint, "variant": variant,
                                 "extra": {"n_tools": len(case.body.get("tools") or [])}}
        if reference_repeat:
            where["extra"][reference_repeats.MARKER] = 0
        try:
            ctx.store.append(ExchangeRecord(**ex.model_dump(), **where))
        except (ValueError, TypeError) as e:  # a reply the record cannot hold: keep the exchange, classified
            ex = failed_exchange(e, body, stream=bool(stream))
            ctx.store.append(ExchangeRecord(**ex.model_dump(), **where))
        ctx.progress.advance(1, error=not ex.ok, retried=max(0, ex.attempts - 1))

    def score(self, suite: ToolcallSuite, records: list[ExchangeRecord], reference: str,
              endpoints: list[str]) -> list[EndpointSuiteResult]:
        results = score_toolcall(suite.manifest.name, suite.cases, records, reference, endpoints)
        for r in results:  # request and error counts that match records.jsonl line for line
            mine = [x for x in records if x.endpoint == r.endpoint and x.kind == "toolcall"]
            r.counts["requests"] = len(mine)
            r.counts["request_errors"] = sum(1 for x in mine if not x.ok)
        skipped = sum(1 for p in suite.problems if p.action == "skipped")
        if skipped:
            for r in results:
                r.notes.append(f"{skipped} suite line(s) skipped as bad input (see input_problems)")
        return results


TOOLCALL_KIND = ToolcallKind()
