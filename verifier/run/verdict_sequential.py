"""The verdict of a ``--sequential`` run: the sequential headlines take their status from the anytime-valid decisions.

Why apart from the rule: a sequential run stops a candidate when its sequential headlines settle, so the cases it
sent are an adaptive sample. The fixed-n tests computed on them (``verdicts``' p-values and intervals) assume the
size was fixed in advance and are not anytime-valid there; reading them as the answer, or advising "about N more
cases", is the peeking docs/verdict.md warns about. So for every headline the sequential test judged
(:mod:`verifier.run.sequential`: schema accuracy, forced-call success, and trigger F1 and argument agreement against
the reference's floor), the status, interval and unit come from its decision; a headline of a stopped suite outside
that set (none for tool calls today; a run whose units lack one) keeps the fixed-n reading, marked as read after an
adaptive stop; suites that ran in full (agent, logprob) keep theirs, marked as fixed-n figures in a sequential run.
The rest of the rule (Holm, the fingerprint, how statuses combine) is :mod:`verifier.run.verdict`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from verifier.records import Interval
from verifier.run.sequential_floor import FLOOR_METRICS
from verifier.run.summary import MetricEvidence, SequentialHeadline, SequentialResult

#: The sequential decision's word -> the verdict's status for a headline.
STATUS = {"differs": "differs", "consistent": "consistent", "open": "inconclusive"}


def decision_text(h: SequentialHeadline, q: SequentialResult) -> str:
    """``settled by the sequential test after N of M cases`` or ``open after N cases``: N the cases sent at the look
    that decided it (or that the run stopped at), M the suite's size."""
    if h.status != "open" and h.settled_at is not None:
        return f"settled by the sequential test after {h.settled_at:,} of {q.of:,} cases"
    return f"open after {q.cases:,} cases (the sequential test did not settle it; the suite has {q.of:,})"


def _sequential_evidence(e: MetricEvidence | None, h: SequentialHeadline, q: SequentialResult) -> MetricEvidence:
    """The headline as the sequential test read it; the fixed-n figure on the same cases kept in ``reason``."""
    fixed = ""
    if e is not None and e.difference.value is not None:
        d = e.difference
        ci = "" if d.low is None or d.high is None else f" [{d.low:+.4f}, {d.high:+.4f}]"
        fixed = (f"; the fixed-n figure on the cases sent, {d.value:+.4f}{ci} over {d.n} {e.unit or 'units'}, is not "
                 f"anytime-valid after the adaptive stop and is not used")
    floor = h.metric in FLOOR_METRICS
    seq = MetricEvidence(
        metric=h.metric, suite=q.suite, value=None if e is None else e.value,
        difference=Interval(value=h.estimate, low=h.low, high=h.high, n=h.units,
                            method="union of two betting confidence sequences, candidate and floor (anytime-valid)"
                            if floor else "betting confidence sequence (anytime-valid)"),
        basis=("sequential test: the candidate's figure against the reference's first answers minus the reference's "
               "own floor (its second answers against its first), per case" if floor else
               "sequential test: mean per-case paired difference, candidate minus reference") +
              " (docs/verdict.md, 'Sequential mode')",
        test="sequential (anytime-valid)", p_value=h.p_value, margin=h.margin if h.margin is not None else
        (None if e is None else e.margin), unit="cases", independent_units=h.units,
        min_units=None if e is None else e.min_units, material=False if e is None else e.material,
        status=STATUS[h.status],  # type: ignore[arg-type]
        reason=decision_text(h, q) + fixed)
    seq.significant = h.status == "differs"
    seq.equivalent = h.status == "consistent"
    return seq


def _mark_fixed_n(e: MetricEvidence, q: SequentialResult | None) -> None:
    """A headline outside the sequential set keeps its fixed-n reading, said plainly to be one."""
    if q is not None:
        stop = f"after {q.cases:,} of {q.of:,} cases" if q.cases < q.of else f"at the suite's end ({q.of:,} cases)"
        note = (f"read after an adaptive stop (the sequential test stopped this suite {stop}): a fixed-n figure on "
                f"the cases sent, not anytime-valid; this headline is not in the sequential set")
        e.cases_to_settle = None  # "N more cases" on an adaptive sample is peeking
    else:
        note = ("a fixed-n figure in a sequential run: this suite ran in full, so it holds at its size, but it is "
                "not anytime-valid")
    e.reason = f"{e.reason}; {note}" if e.reason else note


def apply_sequential(evidence: list[MetricEvidence], results: Sequence[SequentialResult]
                     ) -> tuple[list[MetricEvidence], dict[int, str]]:
    """The candidate's evidence with its sequential headlines replaced by their decisions (and added where the
    fixed-n reading had none), the others marked; and the decision text per returned evidence (by ``id``)."""
    by_suite = {q.suite: q for q in results}
    decided = {(q.suite, h.metric): (h, q) for q in results for h in q.headlines}
    out: list[MetricEvidence] = []
    notes: dict[int, str] = {}
    seen: set[tuple[str, str]] = set()
    for e in evidence:
        key = (e.suite, e.metric)
        if key in decided:
            h, q = decided[key]
            seq = _sequential_evidence(e, h, q)
            notes[id(seq)] = decision_text(h, q)
            out.append(seq)
            seen.add(key)
        else:
            _mark_fixed_n(e, by_suite.get(e.suite))
            out.append(e)
    for key, (h, q) in decided.items():  # a sequential headline the fixed-n reading could not form
        if key not in seen and h.units:
            seq = _sequential_evidence(None, h, q)
            notes[id(seq)] = decision_text(h, q)
            out.append(seq)
    return out, notes
