"""One verdict per candidate: consistent, differs or inconclusive, from the summary's per-suite results.

Why a rule of its own: the per-suite tables give a reader twenty figures; the question they came with has one
answer. The rule (written out, with the convention chosen and why, in docs/verdict.md) judges each headline on its
own unit against its margin, two-sided:

* ``differs``: some headline difference is shown *beyond* its margin (H0 |d| <= margin rejected), or a metric the
  policy marks as always material differs at all (point null), after Holm correction across the endpoint's family
  of tests, the calibrated KL fingerprint included (family-wise error at most ``alpha``).
* ``consistent``: every headline difference is *shown inside* its margin by two one-sided tests (an
  intersection-union test, error at most ``alpha`` without correction), every headline rests on at least its
  minimum of independent units, and the fingerprint does not name another profile.
* ``inconclusive``: between; with the estimate, which metrics are "not testable", and how many more cases would
  likely settle it, with the warning that judging the same run again needs the sequential mode.

Everything is computed from figures already in the summary, so any ``summary.json`` can be judged again
(``compute_verdicts``) without the records.
"""

from __future__ import annotations

from collections.abc import Iterable

from verifier.run.claims import contradiction_headline
from verifier.run.summary import EndpointSuiteResult, FingerprintEvidence, RunSummary, SequentialResult, Verdict
from verifier.run.verdict_evidence import Reading, read_fingerprint, read_suite
from verifier.run.verdict_policy import HEADLINE_METRICS, HEADLINE_ORDER, VerdictPolicy
from verifier.run.verdict_sequential import apply_sequential
from verifier.run.verdict_stats import more_units, p_inside, p_outside, p_point, spread
from verifier.run.verdict_text import (
    PEEKING_WARNING,
    describe,
    fingerprint_text,
    margin_text,
    not_testable_text,
)
from verifier.stats.multiple import adjust_pvalues

__all__ = ["HEADLINE_METRICS", "VerdictPolicy", "compute_verdicts", "describe", "verdict_for"]


def _test(r: Reading, policy: VerdictPolicy) -> None:
    """Fill the reading's p-values: equivalence (TOST) and beyond-the-margin (or point null when material)."""
    e = r.evidence
    s = spread(e.difference)
    if e.min_units is not None and (e.independent_units or 0) < e.min_units:
        e.status = "not testable"
        return
    if e.material and r.can_be_outside:
        e.test = e.test or "point null from the interval"
        e.p_value = r.given_p if r.given_p is not None else (None if s is None else p_point(s))
        e.p_outside = e.p_value
    elif s is not None and e.margin is not None and r.can_be_outside:
        e.p_value = r.given_p
        e.p_outside = p_outside(s, e.margin, r.sides)
        e.test = f"beyond ±margin, from the {e.difference.method or 'reported'} interval"
    else:
        e.p_value = r.given_p
    if s is not None and e.margin is not None and r.can_be_inside:
        e.p_equivalence = p_inside(s, e.margin, r.sides)


def _holm(readings: list[Reading], fp: FingerprintEvidence | None, alpha: float) -> int:
    """Holm across the endpoint's family (every margin / material test, plus the fingerprint); returns its size."""
    family: list[tuple[object, float]] = [(r.evidence, float(r.evidence.p_outside)) for r in readings
                                          if r.evidence.p_outside is not None]
    if fp is not None and fp.p_value is not None:
        family.append((fp, fp.p_value))
    for (item, _), adj in zip(family, adjust_pvalues([p for _, p in family], "holm")):
        item.p_holm = adj  # type: ignore[attr-defined]
    for r in readings:
        e = r.evidence
        e.significant = e.p_holm is not None and e.p_holm <= alpha
        e.equivalent = e.status != "not testable" and e.p_equivalence is not None and e.p_equivalence <= alpha
        if e.status is None:
            e.status = "differs" if e.significant else "consistent" if e.equivalent else "inconclusive"
    if fp is not None:
        fp.significant = fp.names_other and fp.p_holm is not None and fp.p_holm <= alpha
    return len(family)


def _settle(readings: list[Reading], policy: VerdictPolicy, family: int) -> None:
    for r in readings:
        e = r.evidence
        s = spread(e.difference)
        if e.status == "inconclusive" and s is not None and e.independent_units:
            e.cases_to_settle = more_units(s, e.independent_units, e.margin, policy.alpha, family,
                                           material=e.material and r.can_be_outside, sides=r.sides,
                                           can_be_inside=r.can_be_inside, can_be_outside=r.can_be_outside)


def verdict_for(endpoint: str, results: Iterable[EndpointSuiteResult], reference_results: Iterable[EndpointSuiteResult],
                reference: str, policy: VerdictPolicy | None = None,
                sequential: Iterable[SequentialResult] = ()) -> Verdict:
    """The verdict of one candidate from its per-suite results and the reference's (same suites).

    ``sequential``: this candidate's ``--sequential`` results; their headlines are judged by the anytime-valid
    decisions instead of the fixed-n tests (:mod:`verifier.run.verdict_sequential`)."""
    policy = policy or VerdictPolicy()
    refs = {r.suite: r for r in reference_results}
    readings: list[Reading] = []
    fingerprints: list[FingerprintEvidence] = []
    for res in results:
        readings += read_suite(res, refs.get(res.suite), policy)
        fp = read_fingerprint(res, policy)
        if fp is not None:
            fingerprints.append(fp)
    readings.sort(key=lambda r: HEADLINE_ORDER.index(r.evidence.metric))
    fingerprint = next((f for f in fingerprints if f.names_other), fingerprints[0] if fingerprints else None)
    for r in readings:
        _test(r, policy)
    family = _holm(readings, fingerprint, policy.alpha)
    _settle(readings, policy, family)
    notes: dict[int, str] = {}
    seq = list(sequential)
    if seq:
        kept = {id(r.evidence): r for r in readings}
        evidence, notes = apply_sequential([r.evidence for r in readings], seq)
        readings = [kept.get(id(e)) or Reading(e) for e in evidence]
    evidence = [r.evidence for r in readings]
    untestable = [e for e in evidence if e.status == "not testable"]
    common = dict(endpoint=endpoint, reference=reference, alpha=policy.alpha, evidence=evidence,
                  fingerprint=fingerprint, not_testable=list(dict.fromkeys(e.metric for e in untestable)),
                  warnings=list(dict.fromkeys(r.warning for r in readings if r.warning)))
    fp_text = fingerprint_text(fingerprint)

    shown = [e for e in evidence if e.significant]
    if shown or (fingerprint is not None and fingerprint.significant):
        parts = [describe(e) + (" (a significant difference on a metric marked material)" if e.material else "")
                 + _note(notes, e) for e in shown]
        if fingerprint is not None and fingerprint.significant:
            parts.append(fp_text)
        task = [e for e in evidence if not e.metric.startswith("kl_")]
        if task and not any(e.significant for e in task):  # only the distribution moved: say what did not, at what n
            parts.append("no task-level difference shown at this size (" + "; ".join(describe(e) for e in task) + ")")
        return Verdict(status="differs", headline=f"{endpoint} differs from {reference}: " + "; ".join(parts),
                       **common)  # type: ignore[arg-type]
    fp_ok = fingerprint is None or (fingerprint.profile in (policy.reference_profile, "no profiles")
                                    and not fingerprint.names_other)
    if evidence and all(e.status == "consistent" for e in evidence) and fp_ok:
        parts = [f"{describe(e)} within {margin_text(e)}{_note(notes, e)}" for e in evidence]
        parts += [fp_text] if fp_text else []
        return Verdict(status="consistent", headline=f"{endpoint} is consistent with {reference}: " + "; ".join(parts),
                       **common)  # type: ignore[arg-type]
    if not evidence:
        return Verdict(status="inconclusive", headline=f"{endpoint} vs {reference} is inconclusive: no headline "
                                                       f"metric was measured (run a toolcall, agent or logprob suite)",
                       **common)  # type: ignore[arg-type]
    return _inconclusive(endpoint, reference, readings, fingerprint, fp_ok, fp_text, common, notes, bool(seq))


def _note(notes: dict[int, str], e: object) -> str:
    """The sequential decision's words after a headline's figure (empty outside the sequential set)."""
    text = notes.get(id(e))
    return f", {text}" if text else ""


def _inconclusive(endpoint: str, reference: str, readings: list[Reading], fingerprint: FingerprintEvidence | None,
                  fp_ok: bool, fp_text: str, common: dict, notes: dict[int, str], sequential_run: bool) -> Verdict:
    """The estimate of every open metric, what is not testable, and how many more would settle it (with a warning).

    No such advice for a headline the sequential test left open: that run stopped adaptively, and a count of
    "more cases" to add to it and judge again is the peeking the sequential mode exists to avoid."""
    open_ = [r for r in readings if r.evidence.status == "inconclusive"]
    parts = []
    for r in open_:
        e = r.evidence
        why = r.why_open or ("a lower bound cannot show it small" if not r.can_be_inside
                             else f"not shown within {margin_text(e)}")
        parts.append(f"{describe(e)} {why}{_note(notes, e)}")
    parts += [not_testable_text(r.evidence) for r in readings if r.evidence.status == "not testable"]
    if not fp_ok and fp_text:
        parts.append(fp_text + ("" if fingerprint is not None and fingerprint.names_other
                                else " (not the reference's, but without margin)"))
    needed = [(r.evidence.cases_to_settle, r.evidence.unit) for r in open_ if r.evidence.cases_to_settle is not None]
    warnings: list[str] = list(common["warnings"])
    settle = None
    seq_open = [r for r in open_ if id(r.evidence) in notes]
    adaptive = [HEADLINE_METRICS[r.evidence.metric] for r in open_
                if sequential_run and id(r.evidence) not in notes and r.evidence.cases_to_settle is None]
    if seq_open:
        tail = ("; the sequential test left it open: judging this run again is a second look (peeking); a fresh "
                "--sequential run on a larger suite can settle it")
    elif adaptive:
        tail = (f"; {', '.join(dict.fromkeys(adaptive))} not in the sequential set: a fixed-n figure read after an "
                f"adaptive stop, not anytime-valid (a fixed-n run of the planned size settles it)")
    elif needed and len(needed) == len(open_):
        settle, unit = max(needed, key=lambda x: x[0] or 0)
        tail = f"; about {settle} more {unit or 'cases'} would likely settle it ({PEEKING_WARNING})"
        warnings.append(PEEKING_WARNING)
    elif open_:
        stuck = [HEADLINE_METRICS[r.evidence.metric] for r in open_ if r.evidence.cases_to_settle is None]
        tail = (f"; more cases alone may not settle it ({', '.join(dict.fromkeys(stuck))}: a lower bound, a "
                f"figure against perfect agreement without the reference's floor, at the margin, or beyond it "
                f"without enough evidence)")
    else:
        tail = ""
    return Verdict(status="inconclusive", headline=f"{endpoint} vs {reference} is inconclusive: " + "; ".join(parts)
                   + tail, cases_to_settle=settle, **{**common, "warnings": warnings})


def compute_verdicts(summary: RunSummary, policy: VerdictPolicy | None = None) -> dict[str, Verdict]:
    """A verdict for every candidate of the run (the reference is the yardstick and gets none)."""
    ref_results = [r for r in summary.results if r.endpoint == summary.reference]
    out: dict[str, Verdict] = {}
    for ep in summary.endpoints:
        if ep.name == summary.reference:
            continue
        mine = [r for r in summary.results if r.endpoint == ep.name]
        seq = [q for q in summary.sequential if q.endpoint == ep.name]
        out[ep.name] = verdict_for(ep.name, mine, ref_results, summary.reference, policy, seq)
        contradiction = contradiction_headline(ep.name, summary.claims.get(ep.name, []))
        if contradiction:  # a stated claim the run contradicts is named first (verifier/run/claims.py)
            out[ep.name].headline = f"{contradiction}. {out[ep.name].headline}"
    return out
