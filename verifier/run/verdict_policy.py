"""``[verdict]`` in the policy file: error rate, margins, what is always material, minimum units, gate statuses.

A module of its own so that the rule (:mod:`verifier.run.verdict`), the evidence reader
(:mod:`verifier.run.verdict_evidence`) and the gate read one definition. Defaults and why: docs/verdict.md.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from verifier.kinds.logprob.cluster_ci import MIN_CLUSTERS

#: Headline metrics with the words a headline uses for them. Order is the dashboard's (kept from schema 1.1);
#: a headline names them in :data:`HEADLINE_ORDER`.
HEADLINE_METRICS: dict[str, str] = {
    "trigger_f1": "trigger F1",
    "schema_accuracy": "schema accuracy",
    "forced_call_success": "forced-call success",
    "task_success": "agent task success",
    "kl_mean": "mean KL",
    "argument_agreement": "argument agreement",
    "kl_topk_lower": "KL lower bound (top-k)",
}
#: Task-level effects first, then per-call, then the token-level KL (what a reader acts on first).
HEADLINE_ORDER: tuple[str, ...] = ("task_success", "trigger_f1", "argument_agreement", "schema_accuracy",
                                   "forced_call_success", "kl_mean", "kl_topk_lower")
#: Metrics measured in proportions (shown as points); KL is in nats per token.
PROPORTIONS = frozenset({"trigger_f1", "schema_accuracy", "forced_call_success", "task_success",
                         "argument_agreement"})


def _default_margins() -> dict[str, float]:
    return {"trigger_f1": 0.05, "argument_agreement": 0.05, "schema_accuracy": 0.05, "forced_call_success": 0.05,
            "task_success": 0.10, "kl_mean": 0.01}


def _default_min_units() -> dict[str, int]:
    # KL: prompts, the clusters its interval resamples; below MIN_CLUSTERS the interval is not given at all
    return {"task_success": 10, "trigger_f1": 30, "argument_agreement": 30, "schema_accuracy": 30,
            "forced_call_success": 30, "kl_mean": MIN_CLUSTERS, "kl_topk_lower": MIN_CLUSTERS}


class VerdictPolicy(BaseModel):
    """``[verdict]`` in the policy file (docs/verdict.md explains each default)."""

    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(0.05, gt=0, lt=0.5)
    #: Margins: proportions in absolute points (0.05 = 5 points); trigger F1 and argument agreement against a twin
    #: of the reference (its own run-to-run agreement); kl_mean (and its top-k lower bound) in nats per token.
    margins: dict[str, float] = Field(default_factory=_default_margins)
    #: Metrics where any significant difference matters, whatever its size (point null instead of the margin):
    #: a reference serving the same model honours ``tool_choice`` every time, so a reliable drop is a defect.
    material: list[str] = Field(default_factory=lambda: ["forced_call_success"])
    #: Fewer independent units than this (scenarios for agent metrics, cases or calls for tool calls, prompts for
    #: KL): the metric is "not testable" and cannot make the verdict consistent.
    min_units: dict[str, int] = Field(default_factory=_default_min_units)
    fingerprint_margin: float = Field(0.1, ge=0)  # decades of KL (RMS) the named profile must beat the reference's by
    reference_profile: str = "bf16"  # the profile library's name for the reference variant
    fail_on: list[str] = Field(default_factory=lambda: ["differs"])  # statuses that fail ``verifier gate``
    warn_on: list[str] = Field(default_factory=lambda: ["inconclusive"])  # statuses that warn

    def margin(self, metric: str) -> float | None:
        """The margin for ``metric``; the top-k lower bound bounds the same KL, so it shares ``kl_mean``'s."""
        return self.margins.get(metric, self.margins.get("kl_mean") if metric == "kl_topk_lower" else None)
