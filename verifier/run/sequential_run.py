"""Send a suite look by look under ``--sequential``, stopping each candidate once its headlines are settled.

Why apart from the runner: the runner owns the order of events of every run; this is the one loop that differs.
Cases go out in a seeded random order (drawn once, kept in ``manifest.json`` so ``--resume`` keeps it), in batches
of ``look_every`` cases; the reference answers every batch while any candidate still needs it; after each batch
each open candidate's headlines are judged (:mod:`verifier.run.sequential`) and a settled one gets no more cases.
A kind takes part by offering ``sequential_units(suite, order, records, reference, candidate)`` and
``pending(suite, ctx)``; a kind without them (agent, logprob, cache) runs its whole suite as usual.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from verifier.run.protocol import RunContext
from verifier.run.sequential import LOOK_EVERY, SequentialPolicy, judge_endpoint, look_schedule
from verifier.run.summary import SequentialResult


class SequentialSettings(BaseModel):
    """``--sequential [--look-every N]`` and the case order per suite (what the manifest keeps for ``--resume``)."""

    look_every: int = Field(LOOK_EVERY, ge=1)
    order: dict[str, list[str]] = Field(default_factory=dict)  # suite name -> case ids in draw order


def draw_order(case_ids: Sequence[str], seed: int, suite: str) -> list[str]:
    """A seeded random permutation of the suite's cases: every prefix is a random sample of the suite."""
    ids = list(case_ids)
    random.Random(f"sequential/{seed}/{suite}").shuffle(ids)
    return ids


def supports(kind: Any) -> bool:
    return hasattr(kind, "sequential_units") and hasattr(kind, "pending")


async def run_sequential(kind: Any, suite: Any, ctx: RunContext, settings: SequentialSettings,
                         policy: SequentialPolicy) -> list[SequentialResult]:
    """Send ``suite`` in the settings' order, a look at a time; one result per candidate."""
    name = suite.manifest.name
    by_id = {c.id: c for c in suite.cases}
    order = [i for i in settings.order.get(name, []) if i in by_id]
    order += [c.id for c in suite.cases if c.id not in set(order)]  # never drop a case the order misses
    total, step = len(order), settings.look_every
    open_, sent = list(ctx.candidates), 0
    judged: dict[str, tuple[int | None, list]] = {}
    while open_ and sent < total:
        prev, sent = sent, min(sent + step, total)
        batch = dataclasses.replace(suite, cases=[by_id[i] for i in order[prev:sent]])
        batch_ctx = dataclasses.replace(ctx, candidates=list(open_))
        if kind.pending(batch, batch_ctx):  # a batch wholly on disk (--resume) is only judged again
            await kind.run(batch, batch_ctx)
        records = ctx.store.read(kind=kind.kind, suite=name)
        looks = look_schedule(sent, step, total)
        for cand in list(open_):
            judged[cand] = judge_endpoint(kind.sequential_units(suite, order, records, ctx.reference, cand),
                                          policy, looks)
            if judged[cand][0] is not None:
                open_.remove(cand)
    out = []
    for cand in ctx.candidates:
        settled_at, heads = judged.get(cand, (None, []))
        out.append(SequentialResult(suite=name, endpoint=cand, cases=settled_at if settled_at is not None else sent,
                                    of=total, look_every=step, settled=settled_at is not None, headlines=heads))
    return out


def stopped_block(results: Sequence[SequentialResult], reference: str) -> dict[str, Any] | None:
    """``summary.json``'s ``stopped`` for a sequential run: ``{"reason": "settled", "cases": {endpoint: int}}``.

    Cases are summed over the sequential suites; the reference answered as many as its longest-running candidate.
    None when no candidate stopped before the end of its suite (nothing was saved).
    """
    if not any(r.settled and r.cases < r.of for r in results):
        return None
    cases: dict[str, int] = {}
    of: dict[str, int] = {}
    for r in results:
        cases[r.endpoint] = cases.get(r.endpoint, 0) + r.cases
    for suite in {r.suite for r in results}:
        mine = [r for r in results if r.suite == suite]
        cases[reference] = cases.get(reference, 0) + max(r.cases for r in mine)
        of[suite] = mine[0].of
    return {"reason": "settled", "cases": cases, "of": of,
            "open": sorted({r.endpoint for r in results if not r.settled})}
