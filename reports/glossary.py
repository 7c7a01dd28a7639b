"""Words for every metric and test name a summary can hold, so no row of the report is a bare identifier.

Why patterns as well as names: the scoring modules build families of names (``latency_p95_s``, ``kl_p99.9``,
``forced_kl_mean``, ``schema_accuracy_stream``, ``expected_case_accuracy``, ``pass^3``); one rule per family keeps
the glossary complete when a percentile or a path is added. ``tests/report/test_glossary.py`` collects the names
the scoring code can write and checks each has an entry.
"""

from __future__ import annotations

import re

__all__ = ["GLOSSARY", "TEST_NAMES", "entry", "glossary_id", "glossary_key", "describe_test"]

#: Definitions by exact name (also the glossary list at the foot of the page, in this order).
GLOSSARY: dict[str, str] = {
    "trigger_f1": "F1 of the candidate's decision to call a tool (finish_reason tool_calls), taking the reference's "
                  "decision on the same case as the truth. 100% = it calls tools exactly when the reference does.",
    "trigger_precision": "Of the cases where the candidate called a tool, the share where the reference did too.",
    "trigger_recall": "Of the cases where the reference called a tool, the share where the candidate did too.",
    "trigger_rate": "Share of successful replies that call a tool.",
    "schema_accuracy": "Share of tool calls whose arguments parse as JSON and validate against the tool's JSON Schema.",
    "forced_call_success": "Share of cases that force a tool (tool_choice) where the reply is a valid call of it.",
    "k2vv_schema_accuracy": "K2-Vendor-Verifier's figure: of replies with finish_reason tool_calls, the share whose "
                            "every call is valid.",
    "argument_agreement": "Of the tool calls both endpoints made at the same position with the same tool, the "
                          "share whose arguments are exactly equal to the reference's (first answer), as a "
                          "proportion. Its headline is this minus the reference's agreement with itself "
                          "(argument_agreement_floor), in points.",
    "argument_agreement_floor": "The reference's argument agreement with itself: on the cases it answered twice "
                                "(--reference-repeat-share), the share of calls in its second answer whose "
                                "arguments exactly equal its first's; what a perfect twin of it would reach. 100% "
                                "for a deterministic reference.",
    "trigger_f1_floor": "The reference's trigger F1 against itself: its second answers' call/no-call decisions "
                        "scored against its first, on the cases it answered twice (--reference-repeat-share); the "
                        "F1 a perfect twin would reach. The candidate's trigger F1 headline is measured against it.",
    "reference_self_trigger_f1": "The reference's own run-to-run trigger F1 (shown on the reference's row): its "
                                 "second answers against its first on the cases it answered twice; below 100% "
                                 "when it samples.",
    "reference_self_argument_agreement": "The reference's own run-to-run argument agreement (shown on the "
                                         "reference's row): share of calls in its second answers with arguments "
                                         "exactly equal to its first answers', on the cases it answered twice.",
    "reference_repeat_differs": "Share of the reference's twice-answered cases (per case and stream variant) where "
                                "the second answer differs from the first: above 0% means the reference samples, "
                                "even when asked at temperature 0.",
    "tool_name_agreement": "Where both called tools: the same tool names as the reference.",
    "args_exact_agreement": "Where both called the same tools: identical arguments.",
    "args_bfcl_agreement": "Where both called the same tools: arguments equal under BFCL's AST-style rules.",
    "repeat_trigger_f1": "Trigger F1 of a repeated request against the first reply to the same case (run with "
                         "--repeats): how stable the endpoint's own decisions are.",
    "repeat_trigger_consistency": "Share of repeated requests whose call/no-call decision matches the first reply.",
    "repeat_consistency": "Share of repeated requests whose reply matches the first reply to the same case.",
    "error_rate": "Share of requests that failed after retries (HTTP error, timeout, malformed reply).",
    "endpoint_error_rate": "Share of agent trials cut short by an endpoint failure (not by the model's actions).",
    "latency_mean_s": "Mean total request latency of successful requests, seconds.",
    "tokens_per_s": "Mean completion tokens per second of request latency, per request.",
    "task_success": "Share of long-horizon agent trials whose final environment state passes the scenario's check "
                    "(pass^1 is the same quantity, so only this one is shown).",
    "pass^k": "Share of scenarios solved in all k repeated trials (tau-bench's unbiased estimator).",
    "step_validity": "Share of agent steps with a valid tool call.",
    "first_invalid_step_median": "Median step of a trial's first invalid tool call (Kaplan-Meier; later = better).",
    "trajectory_divergence_step_median": "Median step where the candidate's trial first takes a different action "
                                         "from the reference's (Kaplan-Meier).",
    "kl_mean": "Mean per-token KL(reference || candidate), nats, on the reference's continuation (lower = closer).",
    "kl_median": "Median per-token KL(reference || candidate), nats.",
    "kl_max": "Largest per-token KL over all positions, nats.",
    "kl_topk_lower": "Mean per-token lower bound on KL(reference || candidate), nats, from top-k logprobs only: "
                     "the KL is at least this (it can show a difference, never that the KL is small).",
    "kl_tail_mass": "Mean probability mass the reference puts outside its own top-k tokens (0-1 scale, per "
                    "position): the part of the distribution a top-k lower bound cannot see.",
    "kl_lower_mean": "Mean of the lower bound on KL when only top-k logprobs are returned, nats.",
    "same_top": "Share of positions where the candidate's most likely token is the reference's.",
    "delta_p_rms": "Root mean square of the change in the probability of the reference's token (0-1 scale).",
    "delta_p_mean": "Mean change in the probability of the reference's token (candidate - reference, 0-1 scale).",
    "ln_ppl_ratio": "ln(perplexity of candidate / perplexity of reference) on the same text; 0 = equal.",
    "greedy_diverged": "Share of greedy generations that leave the reference's tokens before the end.",
    "first_divergence_median": "Median token position where a greedy generation first leaves the reference's.",
    "cache_hit_rate": "Cached prompt tokens over cacheable prompt tokens (first request of each session excluded).",
    "cache_bound": "The most that could have been cached: cacheable over all prompt tokens (an upper line).",
    "prompt_tokens_accepted": "Share of requests whose reported prompt_tokens is within tolerance of a local count.",
    "prompt_tokens_overcount_mean": "Mean of reported minus locally counted prompt tokens, tokens per request.",
    "fingerprint": "The closest calibrated KL profile (bf16, fp8-kv, int4-decode, ...): which precision variant the "
                   "candidate's KL distribution looks like. Distance: how far the candidate's KL distribution is "
                   "from that profile (0 = the same shape; the reference profile's distance is given beside it).",
    "consistent": "Every headline difference shown inside its equivalence margin (two one-sided tests at α).",
    "differs": "A headline difference shown beyond its margin (or, on a metric the policy marks material, shown at "
               "all) after Holm correction, or a fingerprint naming another variant with margin.",
    "inconclusive": "Neither shown, or a headline below its minimum of units (\"not testable\"): the headline gives "
                    "the estimate and about how many more cases would settle it.",
}

#: Significance tests as a reader meets them in the comparison table.
TEST_NAMES: dict[str, str] = {
    "mcnemar": "McNemar's test on paired cases",
    "cluster_robust": "z-test with cluster-robust errors (trials grouped by scenario)",
    "paired_bootstrap": "paired bootstrap over cases",
    "paired_session_bootstrap": "paired bootstrap over sessions",
    "newcombe": "Newcombe interval for paired proportions",
    "welch": "Welch's t-test",
    "f1_minus_reference_floor": "trigger F1 minus the reference's own F1 against itself (stratified cluster "
                                "bootstrap over cases)",
    "agreement_minus_reference_floor": "argument agreement minus the reference's own agreement with itself "
                                       "(stratified cluster bootstrap over cases)",
}

_PCT = re.compile(r"^(latency|ttft|tpot|itl)_p(\d+(?:\.\d+)?)_s$")
_TIMING = {"latency": "total request latency", "ttft": "time to first token",
           "tpot": "time per output token after the first", "itl": "time between streamed chunks"}
_KL_PCT = re.compile(r"^kl_p(\d+(?:\.\d+)?)$")
_PASS_K = re.compile(r"^pass\^(\d+)$")
_PATHS = {"forced": "teacher-forced path (the prompt and the reference's text prefilled)",
          "decode": "decode path (greedy generation)"}
_VARIANTS = {"stream": "streamed requests only", "nonstream": "non-streamed requests only"}
_EXPECTED_ONLY = {
    "tool_accuracy": "Share of cases where the called tool is the one the suite's label expects.",
    "args_exact": "Share of labelled calls whose arguments equal the suite's expected arguments exactly.",
    "args_bfcl": "Share of labelled calls whose arguments match the suite's expected ones under BFCL's rules.",
    "case_accuracy": "Share of cases answered as the suite's label expects (right call or right abstention).",
}


def glossary_key(metric: str) -> str:
    """The glossary's exact entry a name links to (``pass^3`` -> ``pass^k``; a family member -> its base)."""
    if _PASS_K.match(metric):
        return "pass^k"
    return metric


def entry(metric: str) -> str | None:
    """The definition of ``metric`` (by name or by family), None when nobody has written one yet."""
    if metric in GLOSSARY:
        return GLOSSARY[metric]
    if _PASS_K.match(metric):
        k = _PASS_K.match(metric).group(1)  # type: ignore[union-attr]
        return f"Share of scenarios solved in all {k} repeated trials (tau-bench's unbiased estimator)."
    m = _PCT.match(metric)
    if m:
        return f"{m.group(2)}th percentile of {_TIMING[m.group(1)]} over successful requests, seconds."
    m = _KL_PCT.match(metric)
    if m:
        return f"{m.group(1)}th percentile of per-token KL(reference || candidate), nats."
    if metric.startswith("expected_"):
        base = metric[len("expected_"):]
        if base in _EXPECTED_ONLY:
            return _EXPECTED_ONLY[base]
        inner = entry(base)
        return None if inner is None else f"Against the suite's own labels instead of the reference: {inner}"
    for path, words in _PATHS.items():
        if metric.startswith(path + "_") and metric != "forced_call_success":
            inner = entry(metric[len(path) + 1:])
            if inner is not None:
                return f"On the {words}: {inner}"
    for variant, words in _VARIANTS.items():
        if metric.endswith("_" + variant):
            inner = entry(metric[: -len(variant) - 1])
            if inner is not None:
                return f"{inner} ({words})"
    return None


def glossary_id(metric: str) -> str:
    """The in-page anchor of a metric's glossary entry (ids stay plain ASCII)."""
    return "g-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in glossary_key(metric))


def describe_test(test: str | None) -> str:
    """A significance test's name in words (an unknown name is shown with underscores as spaces)."""
    if not test:
        return ""
    return TEST_NAMES.get(test, test.replace("_", " "))
