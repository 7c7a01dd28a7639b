"""The tool-call headlines as per-case paired units for ``--sequential`` (:mod:`verifier.run.sequential`).

Why per case: the cases are drawn in a seeded random order, so the case is the independent unit of a prefix; each
case's unit is the candidate-minus-reference difference averaged over its (variant, repeat) pairs, in [-1, 1]:

* ``schema_accuracy``: share of valid calls among judged calls, on pairs where both endpoints called a tool
  (the fixed-n headline pools calls; this averages per case: the same when a case has one call a side);
* ``forced_call_success``: success on forced cases (both replies judged), always material.

Trigger F1 and argument agreement are judged against the reference's own repeat floor (a second sample of ~10 %
of the cases); they are not yet part of the sequential set, and the fixed-n verdict reports them on the cases
sent (docs/verdict.md, "Sequential mode").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from verifier.kinds.toolcall.checks import Outcome, analyse
from verifier.kinds.toolcall.headlines import call_validity
from verifier.kinds.toolcall.reference_repeats import is_reference_repeat
from verifier.kinds.toolcall.scoring import forced_verdict
from verifier.kinds.toolcall.suite_format import ToolcallCase
from verifier.records import ExchangeRecord
from verifier.run.sequential import HeadlineUnits


def _schema_unit(a: Outcome, b: Outcome) -> float | None:
    (rv, rn), (cv, cn) = call_validity(a), call_validity(b)
    if not (a.calls and b.calls) or not rn or not cn:
        return None
    return cv / cn - rv / rn


def _forced_unit(a: Outcome, b: Outcome, case: ToolcallCase) -> float | None:
    x, y = forced_verdict(a, case), forced_verdict(b, case)
    if x is None or y is None:
        return None
    return float(y == "success") - float(x == "success")


def toolcall_units(cases: Sequence[ToolcallCase], order: Sequence[str], records: Sequence[ExchangeRecord],
                   reference: str, candidate: str) -> list[HeadlineUnits]:
    """The candidate's headlines as per-case units in ``order`` (case ids); forced calls only if the suite has any."""
    by_id = {c.id: c for c in cases}
    ref: dict[tuple, Outcome] = {}
    mine: list[Outcome] = []
    for r in records:
        if r.kind != "toolcall" or r.case_id not in by_id:
            continue
        if r.endpoint == reference and not is_reference_repeat(r):
            ref[(r.case_id, r.variant, r.repeat)] = analyse(r, by_id[r.case_id])
        elif r.endpoint == candidate:
            mine.append(analyse(r, by_id[r.case_id]))
    per: dict[str, dict[str, list[float]]] = {"schema_accuracy": defaultdict(list),
                                              "forced_call_success": defaultdict(list)}
    for b in mine:
        key = (b.record.case_id, b.record.variant, b.record.repeat)
        a = ref.get(key)
        if a is None or not (a.ok and b.ok):
            continue
        case = by_id[key[0]]
        units = (("schema_accuracy", _schema_unit(a, b)), ("forced_call_success", _forced_unit(a, b, case)))
        for metric, unit in units:
            if unit is not None:
                per[metric][case.id].append(unit)
    position = {cid: i + 1 for i, cid in enumerate(order)}
    metrics = ["schema_accuracy"] + (["forced_call_success"] if any(c.forced() is not None for c in cases) else [])
    out = []
    for metric in metrics:
        ids = sorted((cid for cid in per[metric] if cid in position), key=position.__getitem__)
        out.append(HeadlineUnits(metric=metric, units=np.array([np.mean(per[metric][i]) for i in ids], dtype=float),
                                 positions=np.array([position[i] for i in ids], dtype=int)))
    return out
