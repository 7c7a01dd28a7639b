"""Score tool-call exchanges: per endpoint, against the reference endpoint and against ``_meta.expected``.

Definitions (kept identical to K2-Vendor-Verifier where it defines one, so numbers are comparable):

- *Triggered* means ``finish_reason == "tool_calls"``. Against the reference on the same case (and
  variant, and repeat): TP both triggered, FP only the candidate, FN only the reference, TN neither.
  precision = TP/(TP+FP), recall = TP/(TP+FN), F1 = 2TP/(2TP+FP+FN). Only pairs where both exchanges
  succeeded count; failures are reported by ``error_rate``.
- *Schema accuracy* is per tool call: the name is one of the offered tools and the arguments parse as a
  JSON object valid against that tool's schema (draft from ``$schema``, 2020-12 by default, with a fixed set
  of ``format`` checks; ``""`` arguments mean ``{}``). Failures are counted by kind (unknown tool, not JSON,
  schema violation). Calls of a tool whose own schema fails its metaschema cannot be judged: they are left
  out of the denominator, counted as ``schema_tool_schema_invalid`` and a result note says so.
- ``k2vv_schema_accuracy`` and the ``count_*`` counts follow K2VV's published per-response rule exactly
  (:mod:`verifier.kinds.toolcall.k2vv_rule`), which differs from ours on purpose at the edges (``""`` arguments, empty
  ``parameters``, no format checks, invalid schemas count as invalid calls); ``extra["k2vv_summary"]`` is
  K2VV's ``summary.json`` under its own key names.
- *Forced-call success* (``forced_call_success``) is per exchange of a case whose ``tool_choice`` is
  ``"required"`` or names a function: the reply has at least one call, every call is valid (as above) and,
  for a named function, every call is of that function. A reply without a call fails, whatever its
  ``finish_reason`` (OpenAI itself answers a named forced call with ``stop``).
- *Agreement* is measured on pairs where both endpoints called tools: the same sequence of tool names;
  the same arguments exactly (canonical JSON after parsing, types included) and BFCL-style (an integer is
  accepted for a number; strings compared without case, whitespace and punctuation).
- ``expected_*`` metrics score any endpoint against the suite's own answers, when the suite has them.
- The headline comparisons (``schema_accuracy`` per call on cases where both endpoints called a tool,
  ``argument_agreement`` and ``trigger_f1`` against the reference's own run-to-run floor) are built in
  :mod:`verifier.kinds.toolcall.headlines`; the reference's second answers to its repeated cases
  (:mod:`verifier.kinds.toolcall.reference_repeats`) count for that floor and nothing else.

Every rate is a Wilson interval with its denominator; other candidate-vs-reference differences are paired
(Newcombe interval, exact McNemar p) on the same cases.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from verifier.kinds.toolcall import headlines, k2vv_rule
from verifier.kinds.toolcall.checks import (
    EXCERPT_CHARS,
    Outcome,
    analyse,
    args_bfcl_equal,
    args_exact_equal,
    expected_args_match,
)
from verifier.kinds.toolcall.headlines import PairKey
from verifier.kinds.toolcall.reference_repeats import is_reference_repeat
from verifier.kinds.toolcall.suite_format import ToolcallCase
from verifier.records import ExchangeRecord, Interval
from verifier.run.summary import Comparison, Disagreement, EndpointSuiteResult, Series
from verifier.stats import intervals as stats

MAX_DISAGREEMENTS = 200  # per endpoint and suite; the total is in counts["disagreements_total"]

# --------------------------------------------------------------------------- metric helpers

def f1_interval(tp: Sequence[bool], fp: Sequence[bool], fn: Sequence[bool], clusters: Sequence[Hashable],
                n_boot: int = 1000, seed: int = 0) -> Interval:
    """F1 with a 95% interval; ``n`` is the number of scored pairs.

    F1 = 2J/(1+J) with J = TP/(TP+FP+FN), a monotone map, so a Wilson interval on J maps to an interval
    on F1 that stays honest at the edges (a perfect F1 on 40 cases is not [1, 1]). When cases repeat
    (``--repeats``), repeats are correlated, so the interval is widened to cover a cluster bootstrap
    over cases as well.
    """
    n = len(tp)
    a_tp, a_fp, a_fn = (np.asarray(x, dtype=float) for x in (tp, fp, fn))
    k, m = int(a_tp.sum()), int(a_tp.sum() + a_fp.sum() + a_fn.sum())
    if m == 0:
        return Interval(value=None, n=n, method="wilson_jaccard")
    j = stats.wilson(k, m)
    to_f1 = lambda x: 2 * x / (1 + x)  # noqa: E731
    value, low, high = to_f1(k / m), to_f1(j.low), to_f1(j.high)
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(c, len(index)) for c in clusters), dtype=np.int64, count=n)
    g = len(index)
    if g == n or g < 2:
        return Interval(value=value, low=low, high=high, n=n, method="wilson_jaccard")
    s_tp, s_fp, s_fn = (np.bincount(codes, weights=x, minlength=g) for x in (a_tp, a_fp, a_fn))
    pick = np.random.default_rng(seed).integers(0, g, size=(n_boot, g))
    btp, bfp, bfn = s_tp[pick].sum(1), s_fp[pick].sum(1), s_fn[pick].sum(1)
    denom = 2 * btp + bfp + bfn
    boot = (2 * btp / np.where(denom > 0, denom, 1))[denom > 0]
    if boot.size:
        low = min(low, float(np.quantile(boot, 0.025)))
        high = max(high, float(np.quantile(boot, 0.975)))
    return Interval(value=value, low=low, high=high, n=n, method="wilson_jaccard+cluster_bootstrap")


def _trigger_metrics(pairs: list[tuple[bool, bool, str]], prefix: str) -> tuple[dict[str, Interval], dict[str, int]]:
    """pairs: (truth_triggered, endpoint_triggered, case_id)."""
    tp = [t and e for t, e, _ in pairs]
    fp = [e and not t for t, e, _ in pairs]
    fn = [t and not e for t, e, _ in pairs]
    tn = [not t and not e for t, e, _ in pairs]
    k_tp, k_fp, k_fn = sum(tp), sum(fp), sum(fn)
    metrics = {
        f"{prefix}trigger_precision": stats.wilson(k_tp, k_tp + k_fp),
        f"{prefix}trigger_recall": stats.wilson(k_tp, k_tp + k_fn),
        f"{prefix}trigger_f1": f1_interval(tp, fp, fn, [c for _, _, c in pairs]),
    }
    counts = {f"{prefix}trigger_tp": k_tp, f"{prefix}trigger_fp": k_fp, f"{prefix}trigger_fn": k_fn,
              f"{prefix}trigger_tn": sum(tn)}
    return metrics, counts


def _latency_metrics(outcomes: list[Outcome]) -> tuple[dict[str, Interval], dict[str, Any]]:
    ok = [o.record for o in outcomes if o.ok]
    lat = [r.latency_s for r in ok if r.latency_s is not None]
    ttft = [r.ttft_s for r in ok if r.stream and r.ttft_s is not None]
    tpot: list[float] = []
    itl: list[float] = []
    tps: list[float] = []
    for r in ok:
        toks = r.usage.completion_tokens
        if r.latency_s and toks:
            tps.append(toks / r.latency_s)
        if r.stream and r.ttft_s is not None and r.latency_s is not None and toks and toks > 1:
            tpot.append((r.latency_s - r.ttft_s) / (toks - 1))
        if r.stream and len(r.chunk_times_s) > 1:
            itl.extend(float(x) for x in np.diff(np.asarray(r.chunk_times_s, dtype=float)))
    metrics: dict[str, Interval] = {}
    for name, vals, qs in (("latency", lat, (50, 95, 99)), ("ttft", ttft, (50, 95, 99)), ("tpot", tpot, (50, 95)),
                           ("itl", itl, (50, 95, 99))):
        for key, v in stats.percentiles(vals, qs).items():
            metrics[f"{name}_{key}_s"] = Interval(value=v, n=len(vals), method="percentile")
    if tps:
        metrics["tokens_per_s"] = stats.bootstrap_mean(tps, n_boot=500)
    return metrics, {"latency_n": len(lat), "ttft_n": len(ttft)}


def _paired_comparison(metric: str, a: list[bool], b: list[bool],
                       clusters: Sequence[Hashable] | None = None, unit: str = "exchanges") -> Comparison:
    """b - a on paired booleans: Newcombe interval + exact McNemar when pairs are independent; with repeats
    (a case appearing more than once) a cluster-robust interval and t test over cases instead, because
    repeats of one case are correlated and McNemar would overstate the evidence. ``unit`` names one pair;
    ``independent_units`` is the number of distinct cases (the clusters)."""
    groups = len(set(clusters)) if clusters is not None else len(a)
    if clusters is not None and groups < len(clusters) and groups >= 2:
        fa, fb = [float(x) for x in a], [float(x) for x in b]
        return Comparison(metric=metric, difference=stats.cluster_robust_diff(fa, fb, clusters),
                          p_value=stats.cluster_robust_p(fa, fb, clusters), test="cluster_robust",
                          unit=f"{unit} (clustered by case)", independent_units=groups)
    return Comparison(metric=metric, difference=stats.newcombe_paired_diff(a, b), p_value=stats.mcnemar(a, b),
                      test="mcnemar", unit=unit, independent_units=groups)


def _excerpt(case: ToolcallCase | None) -> str | None:
    if case is None:
        return None
    for m in reversed(case.body.get("messages", [])):
        if m.get("role") == "user":
            c = m.get("content")
            text = c if isinstance(c, str) else json.dumps(c, ensure_ascii=False)
            return text[:EXCERPT_CHARS]
    return None


def _case_correct(o: Outcome, case: ToolcallCase) -> bool:
    """Full agreement with the suite's answer: no call when none is expected; else exactly that call."""
    if not o.ok:
        return False
    if case.expected is None:
        return not o.calls
    return (len(o.calls) == 1 and o.calls[0].name == case.expected.tool and (o.calls[0].valid or not o.calls[0].judged)
            and expected_args_match(o.calls[0].arguments, case.expected))


def forced_verdict(o: Outcome, case: ToolcallCase | None) -> str | None:
    """How a successful exchange of a forced case went: ``success``, ``no_call``, ``wrong_tool`` or
    ``invalid_call``; None when the case forces nothing or the reply cannot be judged (it calls a tool whose
    own schema is invalid, so nothing can be said of its arguments)."""
    forced = case.forced() if case is not None else None
    if forced is None or not o.ok:
        return None
    if not o.calls:
        return "no_call"
    if forced is not True and any(c.name != forced for c in o.calls):
        return "wrong_tool"
    if not all(c.judged for c in o.calls):
        return None
    return "success" if all(c.valid for c in o.calls) else "invalid_call"


# --------------------------------------------------------------------------- the scorer


def _schema_block(outcomes: Iterable[Outcome], prefix: str = "") -> tuple[dict[str, Interval], dict[str, int]]:
    calls = [c for o in outcomes if o.ok for c in o.calls]
    kinds = Counter(c.status for c in calls)
    judged = len(calls) - kinds["tool_schema_invalid"]
    metrics = {f"{prefix}schema_accuracy": stats.wilson(kinds["valid"], judged)}
    counts = {f"{prefix}schema_{k}": kinds[k]
              for k in ("unknown_tool", "not_json", "schema_violation", "tool_schema_invalid")}
    counts[f"{prefix}tool_calls"] = len(calls)
    return metrics, counts


def _forced_block(outcomes: list[Outcome], cases: dict[str, ToolcallCase]) -> tuple[dict[str, Interval],
                                                                                    dict[str, int]]:
    """``forced_call_success`` over the successful exchanges of forced cases, with failures by kind."""
    forced = [o for o in outcomes if o.record.case_id in cases and cases[o.record.case_id].forced() is not None]
    if not forced:
        return {}, {}
    verdicts = Counter(forced_verdict(o, cases[o.record.case_id]) for o in forced if o.ok)
    judged = sum(v for k, v in verdicts.items() if k is not None)
    counts = {"forced_exchanges": len(forced), "forced_errors": sum(1 for o in forced if not o.ok),
              "forced_unjudged": verdicts[None]}
    counts.update({f"forced:{k}": verdicts[k] for k in ("no_call", "wrong_tool", "invalid_call")})
    return {"forced_call_success": stats.wilson(verdicts["success"], judged)}, counts


def _expected_block(outcomes: list[Outcome], cases: dict[str, ToolcallCase]) -> tuple[dict[str, Interval],
                                                                                      dict[str, int]]:
    scored = [(o, cases[o.record.case_id]) for o in outcomes
              if o.ok and o.record.case_id in cases and cases[o.record.case_id].has_expected]
    if not scored:
        return {}, {}
    metrics, counts = _trigger_metrics([(c.expected is not None, o.triggered, c.id) for o, c in scored], "expected_")
    m2, c2 = _schema_block((o for o, c in scored if c.expected is not None), "expected_")
    metrics.update(m2)
    counts.update(c2)
    want = [(o, c.expected) for o, c in scored if c.expected is not None]
    name_ok = [bool(o.calls) and o.calls[0].name == e.tool for o, e in want]
    exact = [ok and args_exact_equal(o.calls[0].arguments, e.arguments) for ok, (o, e) in zip(name_ok, want)]
    bfcl = [ok and expected_args_match(o.calls[0].arguments, e) for ok, (o, e) in zip(name_ok, want)]
    metrics["expected_tool_accuracy"] = stats.rate(name_ok)
    metrics["expected_args_exact"] = stats.rate(exact)
    metrics["expected_args_bfcl"] = stats.rate(bfcl)
    metrics["expected_case_accuracy"] = stats.rate([_case_correct(o, c) for o, c in scored])
    return metrics, counts


def _repeat_block(outcomes: list[Outcome]) -> tuple[dict[str, Interval], dict[str, int]]:
    by_case: dict[tuple[str, str | None], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_case[(o.record.case_id, o.record.variant)].append(o)
    multi = [v for v in by_case.values() if len(v) > 1]
    if not multi:
        return {}, {}
    same = [len({o.signature() for o in v}) == 1 for v in multi]
    same_trigger = [len({(o.ok, o.triggered) for o in v}) == 1 for v in multi]
    metrics = {"repeat_consistency": stats.rate(same), "repeat_trigger_consistency": stats.rate(same_trigger)}
    # The endpoint against its own first repeat: the noise floor any cross-endpoint trigger F1 is judged by.
    aa: list[tuple[bool, bool, str]] = []
    for v in multi:
        first = min(v, key=lambda o: o.record.repeat)
        aa += [(first.triggered, o.triggered, o.record.case_id) for o in v
               if o is not first and o.ok and first.ok]
    if aa:
        m, _ = _trigger_metrics(aa, "")
        metrics["repeat_trigger_f1"] = m["trigger_f1"]
    return metrics, {"repeat_cases": len(multi)}


def _per_repeat_series(outcomes: list[Outcome], cases: dict[str, ToolcallCase]) -> list[Series]:
    """Rates per repeat index, so the report can show run-to-run spread (only with --repeats > 1)."""
    repeats = sorted({o.record.repeat for o in outcomes})
    if len(repeats) < 2:
        return []
    series = []
    for name, fn in (("schema_accuracy", lambda sub: _schema_block(sub)[0]["schema_accuracy"]),
                     ("error_rate", lambda sub: stats.rate([not o.ok for o in sub])),
                     ("expected_case_accuracy", lambda sub: stats.rate(
                         [_case_correct(o, cases[o.record.case_id]) for o in sub
                          if o.record.case_id in cases and cases[o.record.case_id].has_expected]))):
        ivs = [fn([o for o in outcomes if o.record.repeat == r]) for r in repeats]
        if any(iv.value is None for iv in ivs):
            continue
        series.append(Series(name=f"{name}_by_repeat", x=[float(r) for r in repeats], y=[iv.value for iv in ivs],
                             low=[iv.low for iv in ivs], high=[iv.high for iv in ivs], x_label="repeat", y_label=name))
    return series


def _by_tool(outcomes: list[Outcome]) -> dict[str, Any]:
    """Schema validity per called tool name (offered tools only), to show which schemas break."""
    per: dict[str, list[bool]] = defaultdict(list)
    for o in outcomes:
        for c in o.calls:
            if c.status != "unknown_tool" and c.judged and c.name:
                per[c.name].append(c.valid)
    return {name: stats.rate(v).model_dump() for name, v in sorted(per.items())}


def _variant_block(outcomes: list[Outcome]) -> tuple[dict[str, Interval], dict[str, Comparison], dict[str, Any]]:
    """Stream vs non-stream on the same cases: side-by-side rates and a paired comparison."""
    variants = sorted({o.record.variant for o in outcomes if o.record.variant})
    if not {"stream", "nonstream"} <= set(variants):
        return {}, {}, {}
    metrics: dict[str, Interval] = {}
    side: dict[str, Any] = {}
    for v in ("nonstream", "stream"):
        sub = [o for o in outcomes if o.record.variant == v]
        m, c = _schema_block(sub)
        metrics[f"schema_accuracy_{v}"] = m["schema_accuracy"]
        metrics[f"error_rate_{v}"] = stats.rate([not o.ok for o in sub])
        metrics[f"trigger_rate_{v}"] = stats.rate([o.triggered for o in sub if o.ok])
        side[v] = {"counts": c, "errors": sum(1 for o in sub if not o.ok), "n": len(sub)}
    by_key: dict[tuple[str, int], dict[str, Outcome]] = defaultdict(dict)
    for o in outcomes:
        if o.record.variant in ("stream", "nonstream"):
            by_key[(o.record.case_id, o.record.repeat)][o.record.variant] = o
    a, b, ids = [], [], []
    for (case_id, _), pair in by_key.items():
        if len(pair) == 2:
            a.append(pair["nonstream"].ok and pair["nonstream"].all_valid)
            b.append(pair["stream"].ok and pair["stream"].all_valid)
            ids.append(case_id)
    comps = {"stream_vs_nonstream_valid": _paired_comparison("stream_vs_nonstream_valid", a, b, ids)} if a else {}
    return metrics, comps, side


def _feature_block(outcomes: list[Outcome], cases: dict[str, ToolcallCase]) -> dict[str, Any]:
    """Schema validity of forced calls per JSON Schema feature tag (``feature:*``)."""
    per: dict[str, list[bool]] = defaultdict(list)
    for o in outcomes:
        case = cases.get(o.record.case_id)
        if not o.ok or case is None:
            continue
        for t in case.tags:
            if t.startswith("feature:"):
                per[t[len("feature:"):]].append(bool(o.calls) and o.all_valid)
    return {f: stats.rate(v).model_dump() for f, v in sorted(per.items())}


def _in_suite_order(records: list[ExchangeRecord], cases: Sequence[ToolcallCase]) -> list[ExchangeRecord]:
    """The records in the suite's case order (then variant, repeat), not the order they were answered in.

    Why: records are appended as answers come back, so their order follows the run's timing (the concurrency, how
    an engine batched). What scoring lists in order (the disagreements shown in the report) must not change with
    that: the same answers give the same result, at any concurrency. Cases the suite does not hold go last."""
    position = {c.id: i for i, c in enumerate(cases)}
    return sorted(records, key=lambda r: (position.get(r.case_id, len(position)), r.case_id, r.variant or "",
                                          r.repeat))


def score_toolcall(
    suite_name: str,
    cases: Sequence[ToolcallCase],
    records: Sequence[ExchangeRecord],
    reference: str,
    endpoints: Sequence[str],
) -> list[EndpointSuiteResult]:
    """All metrics for every endpoint on one tool-call suite (see the module docstring)."""
    by_id = {c.id: c for c in cases}
    tools_sent = {c.id: c.body.get("tools", []) for c in cases}  # as K2VV reads them: the line's own list
    recs = _in_suite_order([r for r in records if r.kind == "toolcall" and r.suite == suite_name], cases)
    # The reference's second answers to its repeated cases feed only the floor (headlines.reference_floor).
    second = [analyse(r, by_id.get(r.case_id)) for r in recs if r.endpoint == reference and is_reference_repeat(r)]
    outcomes: dict[str, list[Outcome]] = defaultdict(list)
    for r in recs:
        if not (r.endpoint == reference and is_reference_repeat(r)):
            outcomes[r.endpoint].append(analyse(r, by_id.get(r.case_id)))
    ref_index: dict[PairKey, Outcome] = {}
    for o in outcomes.get(reference, []):
        ref_index[(o.record.case_id, o.record.variant, o.record.repeat)] = o
    floor = headlines.reference_floor(ref_index, second)

    results = []
    for ep in endpoints:
        mine = outcomes.get(ep, [])
        res = EndpointSuiteResult(endpoint=ep, suite=suite_name, kind="toolcall", is_reference=(ep == reference))
        res.counts["exchanges"] = len(mine)
        res.metrics["error_rate"] = stats.rate([not o.ok for o in mine])
        errors = Counter(o.record.error_class or f"http_{o.record.status}" for o in mine if not o.ok)
        res.counts.update({f"error:{k}": v for k, v in sorted(errors.items())})
        res.counts["retries"] = sum(max(0, o.record.attempts - 1) for o in mine)
        res.counts["retried_exchanges"] = sum(1 for o in mine if o.record.attempts > 1)
        wire = Counter(issue.split(":", 1)[0] for o in mine for issue in o.record.wire_issues)
        res.counts.update({f"wire:{k}": v for k, v in sorted(wire.items())})
        res.counts["reasoning_content_present"] = sum(1 for o in mine if o.record.reasoning_content)
        finishes = Counter(str(o.record.finish_reason) for o in mine if o.ok)
        res.counts.update({f"finish:{k}": v for k, v in sorted(finishes.items())})
        res.metrics["trigger_rate"] = stats.rate([o.triggered for o in mine if o.ok])

        m, c = _schema_block(mine)
        res.metrics.update(m)
        res.counts.update(c)
        _schema_notes(res, mine, by_id)
        # K2VV's own figure, per response, by K2VV's published rule (verifier.kinds.toolcall.k2vv_rule).
        k2 = k2vv_rule.summarise((o.record for o in mine), tools_sent)
        res.metrics["k2vv_schema_accuracy"] = stats.wilson(k2.successful_tool_call_count, k2.finish_tool_calls)
        res.counts["count_finish_reason_tool_calls"] = k2.finish_tool_calls
        res.counts["count_successful_tool_call"] = k2.successful_tool_call_count
        res.extra["k2vv_summary"] = k2.as_dict()
        for m, c in (_forced_block(mine, by_id), _latency_metrics(mine), _expected_block(mine, by_id),
                     _repeat_block(mine)):
            res.metrics.update(m)
            res.counts.update(c)
        m, comps, side = _variant_block(mine)
        res.metrics.update(m)
        res.comparisons.update(comps)
        if side:
            res.extra["stream_vs_nonstream"] = side
        feats = _feature_block(mine, by_id)
        if feats:
            res.extra["schema_accuracy_by_feature"] = feats
        tools = _by_tool(mine)
        if tools:
            res.extra["schema_accuracy_by_tool"] = tools
        res.series.extend(_per_repeat_series(mine, by_id))
        if ep != reference:
            _against_reference(res, mine, ref_index, by_id, floor)
        else:
            m, c, extra, notes = headlines.reference_block(floor, by_id)
            res.metrics.update(m)
            res.counts.update(c)
            res.notes.extend(notes)
            if extra:
                res.extra["reference_repeats"] = extra
        results.append(res)
    return results


def _schema_notes(res: EndpointSuiteResult, mine: list[Outcome], cases: dict[str, ToolcallCase]) -> None:
    """Say when tools with invalid schemas were offered, and what that did to the denominators."""
    bad_cases = {o.record.case_id for o in mine if o.record.case_id in cases
                 and cases[o.record.case_id].schema_problems}
    if not bad_cases:
        return
    left_out = res.counts.get("schema_tool_schema_invalid", 0)
    res.notes.append(
        f"{len(bad_cases)} case(s) offer tools whose parameters fail their JSON Schema metaschema (sent anyway, "
        f"see input_problems): schema_accuracy and forced_call_success leave the {left_out} call(s) of those tools "
        f"out of their denominators; K2VV's counts (k2vv_schema_accuracy) include them as invalid")


def _against_reference(res: EndpointSuiteResult, mine: list[Outcome], ref_index: dict[PairKey, Outcome],
                       cases: dict[str, ToolcallCase], floor: headlines.Floor) -> None:
    pairs: list[tuple[Outcome, Outcome]] = []
    for o in mine:
        r = o.record
        ref = ref_index.get((r.case_id, r.variant, r.repeat)) or ref_index.get((r.case_id, r.variant, 0))
        if ref is not None:
            pairs.append((ref, o))
    both_ok = [(a, b) for a, b in pairs if a.ok and b.ok]
    res.counts["paired_with_reference"] = len(pairs)
    m, c = _trigger_metrics([(a.triggered, b.triggered, b.record.case_id) for a, b in both_ok], "")
    res.metrics.update(m)
    res.counts.update(c)
    both_called = [(a, b) for a, b in both_ok if a.calls and b.calls]
    names = [a.names == b.names for a, b in both_called]
    exact = [n and all(args_exact_equal(x, y) for x, y in zip(a.parsed_args(), b.parsed_args()))
             for n, (a, b) in zip(names, both_called)]
    bfcl = [n and all(args_bfcl_equal(x, y) for x, y in zip(a.parsed_args(), b.parsed_args()))
            for n, (a, b) in zip(names, both_called)]
    res.metrics["tool_name_agreement"] = stats.rate(names)
    res.metrics["args_exact_agreement"] = stats.rate(exact)
    res.metrics["args_bfcl_agreement"] = stats.rate(bfcl)

    # Paired differences, candidate minus reference, on the same cases. The headlines (schema_accuracy per
    # call, argument_agreement and trigger_f1 against the reference's own floor) each on their own unit.
    ids_all = [b.record.case_id for _, b in pairs]
    ids_ok = [b.record.case_id for _, b in both_ok]
    res.comparisons["error_rate"] = _paired_comparison(
        "error_rate", [not a.ok for a, _ in pairs], [not b.ok for _, b in pairs], ids_all)
    res.comparisons["trigger_rate"] = _paired_comparison(
        "trigger_rate", [a.triggered for a, _ in both_ok], [b.triggered for _, b in both_ok], ids_ok,
        unit="exchanges both endpoints answered")
    schema = headlines.schema_comparison(both_ok)
    if schema is not None:
        res.comparisons["schema_accuracy"] = schema
    f1 = headlines.trigger_f1_comparison(both_ok, floor, res.metrics["trigger_f1"])
    if f1 is not None:
        res.comparisons["trigger_f1"] = f1
    if floor.cases:
        res.metrics["trigger_f1_floor"] = headlines.floor_f1(floor)
    m_args, c_args = headlines.argument_agreement_block(both_ok, floor)
    res.metrics.update(m_args)
    res.comparisons.update(c_args)
    warning = headlines.cache_warning(floor)
    if warning is not None:  # the verdict reads it: a floor of cached copies judges neither way
        res.extra["reference_floor_cache"] = headlines.cache_block(floor, warning)
        res.notes.append(warning)
    forced = [(forced_verdict(a, cases.get(b.record.case_id)), forced_verdict(b, cases.get(b.record.case_id)),
               b.record.case_id) for a, b in both_ok]
    forced = [(x, y, cid) for x, y, cid in forced if x is not None and y is not None]
    if forced:
        res.comparisons["forced_call_success"] = _paired_comparison(
            "forced_call_success", [x == "success" for x, _, _ in forced], [y == "success" for _, y, _ in forced],
            [cid for _, _, cid in forced], unit="exchanges of forced cases both endpoints answered")
    with_exp = [(a, b, cases[b.record.case_id]) for a, b in pairs
                if b.record.case_id in cases and cases[b.record.case_id].has_expected]
    if with_exp:
        res.comparisons["expected_case_accuracy"] = _paired_comparison(
            "expected_case_accuracy", [_case_correct(a, c) for a, _, c in with_exp],
            [_case_correct(b, c) for _, b, c in with_exp], [c.id for _, _, c in with_exp])
    timed = [(a.record.latency_s, b.record.latency_s, b.record.case_id) for a, b in both_ok
             if a.record.latency_s is not None and b.record.latency_s is not None]
    if len(timed) > 1:
        clusters = [c for _, _, c in timed]
        repeated = len(set(clusters)) < len(clusters)  # resample whole cases when repeats are correlated
        res.comparisons["latency_mean_s"] = Comparison(
            metric="latency_mean_s", test="paired_bootstrap",
            difference=stats.paired_bootstrap_diff([x for x, _, _ in timed], [y for _, y, _ in timed],
                                                   clusters=clusters if repeated else None, n_boot=500))

    _disagreements(res, pairs, cases)


def _disagreements(res: EndpointSuiteResult, pairs: list[tuple[Outcome, Outcome]],
                   cases: dict[str, ToolcallCase]) -> None:
    found: list[Disagreement] = []
    for ref, cand in pairs:
        case = cases.get(cand.record.case_id)
        label = cand.record.case_id + (f" [{cand.record.variant}]" if cand.record.variant else "") + (
            f" #{cand.record.repeat}" if cand.record.repeat else "")
        kind, detail = None, None
        if cand.ok and not cand.all_valid:
            bad = next(c for c in cand.calls if c.judged and not c.valid)
            kind, detail = "schema", f"{bad.status}: {bad.error}"
        elif not (ref.ok and cand.ok):
            continue
        elif ref.triggered != cand.triggered:
            kind = "trigger"
            detail = f"reference finish_reason={ref.record.finish_reason}, candidate={cand.record.finish_reason}"
        elif ref.calls and cand.calls and ref.names != cand.names:
            kind, detail = "tool_name", None
        elif ref.calls and cand.calls and not all(
                args_bfcl_equal(x, y) for x, y in zip(ref.parsed_args(), cand.parsed_args())):
            kind, detail = "arguments", None
        if kind is None:
            continue
        found.append(Disagreement(case_id=label, kind=kind, reference=ref.describe(), candidate=cand.describe(),
                                  request_excerpt=_excerpt(case), detail=detail))
    res.counts["disagreements_total"] = len(found)
    res.counts.update({f"disagreements:{k}": v for k, v in sorted(Counter(d.kind for d in found).items())})
    res.disagreements = found[:MAX_DISAGREEMENTS]
    if len(found) > MAX_DISAGREEMENTS:
        res.notes.append(f"{len(found)} disagreements; the first {MAX_DISAGREEMENTS} are listed")
