"""The tool-call headlines as per-case paired units for ``--sequential`` (:mod:`verifier.run.sequential`).

Why per case: the cases are drawn in a seeded random order, so the case is the independent unit of a prefix; each
case's unit is the candidate-minus-reference difference averaged over its (variant, repeat) pairs, in [-1, 1]:

* ``schema_accuracy``: share of valid calls among judged calls, on pairs where both endpoints called a tool
  (the fixed-n headline pools calls; this averages per case: the same when a case has one call a side);
* ``forced_call_success``: success on forced cases (both replies judged), always material;
* ``trigger_f1`` and ``argument_agreement``: judged against the reference's own floor (its second answers to the
  repeated cases vs its first), each side as per-case ratio units (:mod:`verifier.run.sequential_floor`): the
  candidate's on every case, the floor's on the repeated cases sent so far. A run without reference repeats has no
  floor (taken as 1: can be shown close, never different, as in the fixed-n verdict). A floor served from a
  response cache (:class:`~verifier.kinds.toolcall.headlines.Copies`) is no floor: the two are left out of the
  sequential set, and the fixed-n verdict reads them as not judged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from verifier.kinds.toolcall.checks import Outcome, analyse
from verifier.kinds.toolcall.headlines import Copies, argument_agreement, call_validity, ids_informative
from verifier.kinds.toolcall.reference_repeats import MARKER, is_reference_repeat
from verifier.kinds.toolcall.scoring import forced_verdict
from verifier.kinds.toolcall.suite_format import ToolcallCase
from verifier.records import ExchangeRecord
from verifier.run.sequential import HeadlineUnits
from verifier.run.sequential_floor import FLOOR_METRICS, FloorHeadlineUnits, RatioUnits


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


class _RatioSums:
    """Per-case sums for one side of a floor headline: trigger (tp, fp, fn, decisions), args (agree, compared)."""

    def __init__(self) -> None:
        self.trigger: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(4))
        self.args: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(2))

    def add(self, first: Outcome, other: Outcome) -> None:
        cid = other.record.case_id
        t, o = first.triggered, other.triggered
        self.trigger[cid] += (t and o, o and not t, t and not o, 1)
        if first.calls and other.calls:
            agree, n = argument_agreement(first, other)
            if n:
                self.args[cid] += (agree, n)

    def units(self, what: str, position: dict[str, int]) -> RatioUnits:
        table = self.trigger if what == "trigger_f1" else self.args
        ids = sorted((c for c in table if c in position), key=position.__getitem__)
        if not ids:
            return RatioUnits.empty()
        s = np.array([table[c] for c in ids], dtype=float)
        if what == "trigger_f1":  # F1 = E[2 TP] / E[2 TP + FP + FN], each per case over its 2K decision slots
            num, den = 2 * s[:, 0] / (2 * s[:, 3]), (2 * s[:, 0] + s[:, 1] + s[:, 2]) / (2 * s[:, 3])
        else:  # the case's share of agreeing calls
            num, den = s[:, 0] / s[:, 1], np.ones(len(ids))
        return RatioUnits(num=num, den=den, positions=np.array([position[c] for c in ids], dtype=int))


def toolcall_units(cases: Sequence[ToolcallCase], order: Sequence[str], records: Sequence[ExchangeRecord],
                   reference: str, candidate: str, *,
                   repeats: bool = True) -> list[HeadlineUnits | FloorHeadlineUnits]:
    """The candidate's headlines as per-case units in ``order`` (case ids); forced calls only if the suite has any.

    ``repeats``: whether the reference answers some cases twice in this run (False: no floor, taken as 1)."""
    by_id = {c.id: c for c in cases}
    ref: dict[tuple, Outcome] = {}
    mine: list[Outcome] = []
    second: list[Outcome] = []
    for r in records:
        if r.kind != "toolcall" or r.case_id not in by_id:
            continue
        if r.endpoint == reference and is_reference_repeat(r):
            second.append(analyse(r, by_id[r.case_id]))
        elif r.endpoint == reference:
            ref[(r.case_id, r.variant, r.repeat)] = analyse(r, by_id[r.case_id])
        elif r.endpoint == candidate:
            mine.append(analyse(r, by_id[r.case_id]))
    cand_sums, floor_sums = _RatioSums(), _RatioSums()
    copies = Copies(informative=ids_informative(ref))
    for o in second:
        first = ref.get((o.record.case_id, o.record.variant, int(o.record.extra.get(MARKER, 0))))
        if first is not None and first.ok and o.ok:
            floor_sums.add(first, o)
            copies.add(first, o)
    per: dict[str, dict[str, list[float]]] = {"schema_accuracy": defaultdict(list),
                                              "forced_call_success": defaultdict(list)}
    for b in mine:
        key = (b.record.case_id, b.record.variant, b.record.repeat)
        a = ref.get(key)
        if a is None or not (a.ok and b.ok):
            continue
        case = by_id[key[0]]
        cand_sums.add(a, b)
        units = (("schema_accuracy", _schema_unit(a, b)), ("forced_call_success", _forced_unit(a, b, case)))
        for metric, unit in units:
            if unit is not None:
                per[metric][case.id].append(unit)
    position = {cid: i + 1 for i, cid in enumerate(order)}
    metrics = ["schema_accuracy"] + (["forced_call_success"] if any(c.forced() is not None for c in cases) else [])
    out: list[HeadlineUnits | FloorHeadlineUnits] = []
    for metric in metrics:
        ids = sorted((cid for cid in per[metric] if cid in position), key=position.__getitem__)
        out.append(HeadlineUnits(metric=metric, units=np.array([np.mean(per[metric][i]) for i in ids], dtype=float),
                                 positions=np.array([position[i] for i in ids], dtype=int)))
    if repeats and copies.from_cache:
        return out  # the floor is the first answers served again: nothing to judge these two against
    for metric in FLOOR_METRICS:
        out.append(FloorHeadlineUnits(metric=metric, candidate=cand_sums.units(metric, position),
                                      floor=floor_sums.units(metric, position) if repeats else None))
    return out
