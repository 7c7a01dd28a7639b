"""The tool-call headline comparisons, each on its own unit (issue 38), and the reference's run-to-run floor.

Why apart from :mod:`verifier.kinds.toolcall.scoring`: the scorer computes every figure of one endpoint; these are
the few differences the verdict judges, and each must measure exactly what its margin names:

* ``schema_accuracy``: per *call*, on cases where both endpoints called a tool: candidate's share of valid calls
  minus the reference's (a reply without a call is no valid call). Paired by case, calls of a case clustered.
* ``argument_agreement``: calls both endpoints made at the same position with the same tool name, arguments
  exactly equal (:func:`~verifier.kinds.toolcall.checks.args_exact_equal`); the candidate's agreement with the
  reference's first answers minus the reference's agreement with itself (its second answers vs its first).
* ``trigger_f1``: F1 of the candidate's trigger decisions against the reference's first answers minus F1 of the
  reference's second answers against its first: 0 for a twin, even of a sampling server.

Intervals: a cluster bootstrap over cases (stratified so that every replicate holds as many twice-answered cases
as the run did), hulled with a Wilson-based score interval so zero spread never gives zero width
(:mod:`verifier.stats.headline_tests`). The p-value of ``schema_accuracy`` is the exact (or Monte Carlo)
randomization test that swaps the two endpoints' answers within cases; the others' is the hull's own.

A floor served from a response cache is no floor: a second answer that carries the first answer's response ``id``
is that answer again, not a new sample (a reference that regenerates the same tokens answers with a new id). When
at least :data:`CACHED_SHARE` of the repeats are such copies, the two floor headlines cannot be judged either way
(:func:`cache_warning`; the verdict reads ``extra["reference_floor_cache"]``). Ids count only when the reference's
first answers to different cases never share one (some servers send one constant id).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verifier.kinds.toolcall.checks import Outcome, args_exact_equal
from verifier.kinds.toolcall.suite_format import ToolcallCase
from verifier.records import Interval
from verifier.run.summary import Comparison
from verifier.stats import headline_tests as ht
from verifier.stats import intervals as stats

N_BOOT = 2000
SEED = 0
#: Share of the reference's repeats served with the first answer's response id from which its floor is not a
#: measurement. Fewer copies bias the floor by at most this share of its disagreement (a point or so at the
#: margins in use); any copy at all is still reported.
CACHED_SHARE = 0.10

PairKey = tuple[str, str | None, int]  # (case_id, variant, repeat)


# --------------------------------------------------------------------------- per-pair units


def call_validity(o: Outcome) -> tuple[int, int]:
    """(valid calls, judged calls) of one reply."""
    judged = [c for c in o.calls if c.judged]
    return sum(1 for c in judged if c.valid), len(judged)


def argument_agreement(a: Outcome, b: Outcome) -> tuple[int, int]:
    """(calls with exactly equal arguments, calls compared): positions where both replies call the same tool.

    Arguments that did not parse agree only when their raw text is identical (two unparsable calls are not
    "both null").
    """
    agree = n = 0
    for x, y in zip(a.calls, b.calls):
        if x.name != y.name:
            continue
        n += 1
        if x.status == "not_json" or y.status == "not_json":
            agree += x.status == y.status and x.raw_arguments == y.raw_arguments
        else:
            agree += args_exact_equal(x.arguments, y.arguments)
    return agree, n


def _trigger_sums(truth: bool, answer: bool) -> tuple[int, int, int]:
    return int(truth and answer), int(answer and not truth), int(truth and not answer)


# --------------------------------------------------------------------------- the reference's floor


@dataclass
class Copies:
    """The reference's second answers compared with its first by response id: how many carry the first's id.

    One count for the fixed-n floor (:func:`reference_floor`) and the sequential units
    (:mod:`verifier.kinds.toolcall.sequential_units`), so both read a cached floor the same way."""

    informative: bool = True  # False: the reference's first answers to different cases share ids
    compared: int = 0  # pairs whose two answers both carry a response id
    cached: int = 0  # ... of which the second carries the first's id: served from a response cache

    def add(self, first: Outcome, second: Outcome) -> None:
        again = served_again(first, second)
        self.compared += again is not None
        self.cached += bool(again)

    @property
    def seen(self) -> bool:
        """Copies were found, and ids can tell (worth reporting, whether or not they reach the share)."""
        return self.informative and self.cached > 0

    @property
    def from_cache(self) -> bool:
        """The floor is not a measurement: at least :data:`CACHED_SHARE` of the repeats are first answers again."""
        return self.seen and self.cached >= CACHED_SHARE * self.compared


@dataclass
class Floor:
    """The reference's second answers scored against its first, per repeated case (the clusters)."""

    cases: list[str] = field(default_factory=list)
    trigger: dict[str, np.ndarray] = field(default_factory=dict)  # case -> [tp, fp, fn]
    args: dict[str, np.ndarray] = field(default_factory=dict)  # case -> [agree, n]
    differ: list[bool] = field(default_factory=list)  # per (case, variant) answered twice: answers differ
    exchanges: int = 0
    copies: Copies = field(default_factory=Copies)

    @property
    def from_cache(self) -> bool:
        """The floor is not a measurement: a meaningful share of the repeats are the first answers served again."""
        return self.copies.from_cache

    def sums(self, what: str) -> np.ndarray:
        table = self.trigger if what == "trigger" else self.args
        return np.sum([table[c] for c in self.cases], axis=0) if self.cases else np.zeros(3 if what == "trigger" else 2)


def response_id(o: Outcome) -> str | None:
    """The provider's id of the completion (``chatcmpl-...``); None when it sent none."""
    body = o.record.response
    rid = body.get("id") if isinstance(body, dict) else None
    return rid if isinstance(rid, str) and rid else None


def ids_informative(ref_index: dict[PairKey, Outcome]) -> bool:
    """Whether equal response ids can mean a cache hit: no id answers two different cases among the first answers."""
    seen: dict[str, str] = {}
    for (case_id, _, _), o in ref_index.items():
        rid = response_id(o) if o.ok else None
        if rid is not None and seen.setdefault(rid, case_id) != case_id:
            return False
    return True


def served_again(first: Outcome, second: Outcome) -> bool | None:
    """True when the second answer carries the first's response id (a cached copy); None when either has none."""
    a, b = response_id(first), response_id(second)
    return None if a is None or b is None else a == b


def cache_warning(floor: Floor) -> str | None:
    """The words for repeats served from a response cache (None when there were none, or ids cannot tell)."""
    c = floor.copies
    if not c.seen:
        return None
    text = (f"reference repeats served from a response cache: {c.cached} of {c.compared} share the "
            f"first answer's response id")
    if floor.from_cache:
        return text + ("; the reference's floor is not a measurement, so trigger F1 and argument agreement are not "
                       "judged (inconclusive): turn off the response cache in front of the reference (this one "
                       "ignores the 'user' field) to measure it")
    return text + f" (under {CACHED_SHARE:.0%} of the repeats: the floor is still judged, slightly optimistic)"


def reference_floor(ref_index: dict[PairKey, Outcome], second: Sequence[Outcome]) -> Floor:
    """Pair each second answer with the reference's first answer to the same case and variant; count copies."""
    floor = Floor(exchanges=len(second), copies=Copies(informative=ids_informative(ref_index)))
    for o in second:
        r = o.record
        first = ref_index.get((r.case_id, r.variant, int(r.extra.get("reference_repeat_of", 0))))
        if first is None or not (first.ok and o.ok):
            continue
        floor.copies.add(first, o)
        cid = r.case_id
        if cid not in floor.trigger:
            floor.cases.append(cid)
            floor.trigger[cid], floor.args[cid] = np.zeros(3), np.zeros(2)
        floor.trigger[cid] += _trigger_sums(first.triggered, o.triggered)
        if first.calls and o.calls:
            floor.args[cid] += argument_agreement(first, o)
        floor.differ.append(first.signature() != o.signature())
    return floor


def floor_f1(floor: Floor) -> Interval:
    """F1 of the reference's second answers against its first (n: answers paired), Wilson-Jaccard interval."""
    n = len(floor.differ)
    at = ht.jaccard_f1_at(*(int(x) for x in floor.sums("trigger")))(0.95)
    if at is None:
        return Interval(value=None, n=n, method="wilson_jaccard")
    return Interval(value=at[0], low=at[1], high=at[2], n=n, method="wilson_jaccard")


def reference_block(floor: Floor, cases: dict[str, ToolcallCase]) -> tuple[dict[str, Interval], dict[str, int],
                                                                          dict[str, Any], list[str]]:
    """The reference's own figures from its repeated cases: self F1, self argument agreement, answers differing."""
    if not floor.exchanges:
        return {}, {}, {}, []
    a = floor.sums("args")
    metrics = {"reference_self_trigger_f1": floor_f1(floor),
               "reference_self_argument_agreement": stats.wilson(int(a[0]), int(a[1])),
               "reference_repeat_differs": stats.rate(floor.differ)}
    counts = {"reference_repeat_exchanges": floor.exchanges, "reference_repeat_cases": len(floor.cases)}
    if floor.copies.seen:
        counts["reference_repeat_cached"] = floor.copies.cached
    temps = sorted({str(cases[c].body.get("temperature", "unset")) for c in floor.cases if c in cases})
    k, m = sum(floor.differ), len(floor.differ)
    at_zero = temps in (["0"], ["0.0"])
    note = (f"reference answered {m} case(s) twice: {k} differed"
            + (" although they were asked at temperature 0: it samples (a twin's trigger F1 and argument agreement "
               "against it are below 1, and the candidate is judged against that floor)" if k and at_zero else
               "" if not k else f" (requests asked temperature {', '.join(temps)})")
            + ("; identical answers on every repeated case: it looks deterministic, and the floor is 1 with an "
               "interval from the number of repeated cases" if not k and m and not floor.from_cache else ""))
    extra: dict[str, Any] = {"cases": m, "differing": k, "samples": bool(k), "temperatures": temps, "note": note}
    notes = [note]
    warning = cache_warning(floor)
    if warning is not None:
        extra["cache"] = cache_block(floor, warning)
        notes.append(warning)
    return metrics, counts, extra, notes


def cache_block(floor: Floor, warning: str) -> dict[str, Any]:
    """What ``summary.json`` keeps about copies among the repeats (``extra["reference_floor_cache"]``)."""
    return {"cached": floor.copies.cached, "ids_compared": floor.copies.compared, "share_limit": CACHED_SHARE,
            "not_a_measurement": floor.from_cache, "warning": warning}


# --------------------------------------------------------------------------- comparisons


def _per_case(pairs: Sequence[tuple[Outcome, Outcome]], unit: Callable[[Outcome, Outcome], Sequence[float]],
              width: int) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(width))
    for a, b in pairs:
        out[b.record.case_id] += unit(a, b)
    return dict(out)


def _aligned(cand: dict[str, np.ndarray], floor: dict[str, np.ndarray], floor_cases: list[str],
             width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate and floor sums on one list of cases, with the stratum (1: repeated by the reference)."""
    ids = list(dict.fromkeys([*cand, *floor_cases]))
    zero = np.zeros(width)
    c = np.array([cand.get(i, zero) for i in ids]).reshape(len(ids), width)
    f = np.array([floor.get(i, zero) for i in ids]).reshape(len(ids), width)
    strata = np.array([1 if i in floor else 0 for i in ids])
    return c, f, strata


def _versus_floor(metric: str, cand: dict[str, np.ndarray], floor: Floor, width: int,
                  stat: Callable[[np.ndarray], np.ndarray], score_at: Callable[[np.ndarray], ht.LevelInterval],
                  n: int, unit: str, test: str) -> Comparison | None:
    table = floor.trigger if width == 3 else floor.args
    c, f, strata = _aligned(cand, table, floor.cases, width)
    cs, fs = c.sum(0), f.sum(0)
    a, b = stat(cs[None, :])[0], stat(fs[None, :])[0]
    if not (np.isfinite(a) and np.isfinite(b)):
        return None
    w = ht.stratified_cluster_weights(strata, N_BOOT, SEED)
    boot = stat(w @ c) - stat(w @ f)
    score = ht.mover(score_at(cs), score_at(fs))
    low, high = ht.hull_interval(boot, score)
    d = float(a - b)
    return Comparison(metric=metric, test=test, unit=unit, p_value=ht.hull_p(boot, score),
                      independent_units=min(len(cand), int((f[:, -1] > 0).sum()) if width == 2 else len(floor.cases)),
                      difference=Interval(value=d, low=low, high=high, n=n,
                                          method="stratified_cluster_bootstrap+mover_wilson"))


def _cache_suffix(floor: Floor) -> str:
    c = floor.copies
    return f" (floor served from a response cache: {c.cached} of {c.compared})" if c.from_cache else ""


def _f1(s: np.ndarray) -> np.ndarray:
    return ht.f1_from_sums(s[:, 0], s[:, 1], s[:, 2])


def _ratio(s: np.ndarray) -> np.ndarray:
    return ht.ratio_from_sums(s[:, 0], s[:, 1])


def trigger_f1_comparison(both_ok: Sequence[tuple[Outcome, Outcome]], floor: Floor,
                          f1: Interval) -> Comparison | None:
    """F1(candidate vs reference) minus F1(reference's second answers vs its first)."""
    cand = _per_case(both_ok, lambda a, b: _trigger_sums(a.triggered, b.triggered), 3)
    if not floor.cases:
        if f1.value is None:
            return None
        shift = lambda v: None if v is None else v - 1  # noqa: E731
        return Comparison(metric="trigger_f1", test="none: no reference repeats (floor taken as 1)", unit="cases",
                          independent_units=len(cand),
                          difference=Interval(value=f1.value - 1, low=shift(f1.low), high=shift(f1.high), n=f1.n,
                                              method=f1.method))
    return _versus_floor("trigger_f1", cand, floor, 3, _f1, lambda s: ht.jaccard_f1_at(*(int(x) for x in s)),
                         n=len(both_ok), unit="cases (trigger decisions; floor from the reference's repeated cases)",
                         test="f1_minus_reference_floor" + _cache_suffix(floor))


def argument_agreement_block(both_ok: Sequence[tuple[Outcome, Outcome]],
                             floor: Floor) -> tuple[dict[str, Interval], dict[str, Comparison]]:
    """The candidate's exact argument agreement with the reference, and its difference from the floor."""
    both_called = [(a, b) for a, b in both_ok if a.calls and b.calls]
    cand = _per_case(both_called, argument_agreement, 2)
    s = np.sum(list(cand.values()), axis=0) if cand else np.zeros(2)
    if s[1] <= 0:
        return {}, {}
    metrics = {"argument_agreement": stats.wilson(int(s[0]), int(s[1]))}
    if floor.cases:
        metrics["argument_agreement_floor"] = stats.wilson(*(int(x) for x in floor.sums("args")))
    comps: dict[str, Comparison] = {}
    if not floor.cases:
        d = metrics["argument_agreement"]
        comps["argument_agreement"] = Comparison(
            metric="argument_agreement", test="none: no reference repeats (floor taken as 1)",
            unit="tool calls both endpoints made (same position, same tool)", independent_units=len(cand),
            difference=Interval(value=(d.value or 0) - 1, low=None if d.low is None else d.low - 1,
                                high=None if d.high is None else d.high - 1, n=d.n, method=d.method))
        return metrics, comps
    comp = _versus_floor("argument_agreement", cand, floor, 2, _ratio, lambda t: ht.wilson_at(int(t[0]), int(t[1])),
                         n=int(s[1]), unit="tool calls both endpoints made (same position, same tool); clustered by "
                                            "case, floor from the reference's repeated cases",
                         test="agreement_minus_reference_floor" + _cache_suffix(floor))
    if comp is not None:
        comps["argument_agreement"] = comp
    return metrics, comps


def _newcombe_floor(a: list[bool], b: list[bool], d: float) -> ht.LevelInterval:
    """Newcombe's paired score interval on position-paired calls, centred on the pooled difference ``d``."""
    def at(conf: float) -> tuple[float, float, float] | None:
        iv = stats.newcombe_paired_diff(a, b, conf)
        if iv.value is None or iv.low is None or iv.high is None:
            return None
        return d, d - (iv.value - iv.low), d + (iv.high - iv.value)
    return at


def schema_comparison(both_ok: Sequence[tuple[Outcome, Outcome]]) -> Comparison | None:
    """Per-call validity, candidate minus reference, on cases where both called a tool (paired by case)."""
    both_called = [(a, b) for a, b in both_ok if a.calls and b.calls]
    per = _per_case(both_called, lambda a, b: (*call_validity(a), *call_validity(b)), 4)
    if not per:
        return None
    t = np.array(list(per.values()))  # columns: ref valid, ref judged, cand valid, cand judged
    if t[:, 1].sum() <= 0 or t[:, 3].sum() <= 0:
        return None
    ref_rate, cand_rate = t[:, 0].sum() / t[:, 1].sum(), t[:, 2].sum() / t[:, 3].sum()
    d = float(cand_rate - ref_rate)
    s = ht.stratified_cluster_weights(np.zeros(len(t)), N_BOOT, SEED) @ t
    boot = ht.ratio_from_sums(s[:, 2], s[:, 3]) - ht.ratio_from_sums(s[:, 0], s[:, 1])
    flags_r, flags_c = [], []
    for a, b in both_called:
        for x, y in zip(a.calls, b.calls):
            if x.judged and y.judged:
                flags_r.append(x.valid)
                flags_c.append(y.valid)
    score = (_newcombe_floor(flags_r, flags_c, d) if flags_r else
             ht.mover(ht.wilson_at(int(t[:, 2].sum()), int(t[:, 3].sum())),
                      ht.wilson_at(int(t[:, 0].sum()), int(t[:, 1].sum()))))
    low, high = ht.hull_interval(boot, score)
    p = ht.cluster_swap_p(t[:, 0], t[:, 1], t[:, 2], t[:, 3], seed=SEED)
    exact = int(((t[:, 0] != t[:, 2]) | (t[:, 1] != t[:, 3])).sum()) <= 14
    return Comparison(metric="schema_accuracy", p_value=p,
                      test="cluster_swap_exact" if exact else "cluster_swap_permutation",
                      unit="tool calls, on cases where both endpoints called a tool (clustered by case)",
                      independent_units=len(t),
                      difference=Interval(value=d, low=low, high=high, n=int(t[:, 3].sum()),
                                          method="cluster_bootstrap+newcombe_paired_floor"))
