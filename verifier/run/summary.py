"""The typed shape of ``summary.json``: the contract CI users, the report, the gate and history read.

Scoring modules (one per suite kind) each produce :class:`EndpointSuiteResult` objects; the run
assembles them into a :class:`RunSummary`. Its JSON Schema is published as ``docs/summary.schema.json``
(regenerate with ``python -m verifier.run.summary > docs/summary.schema.json``). Changes must be
additive; bump ``SCHEMA_VERSION`` on any breaking change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from verifier.records import Interval, Price, StatedClaims, SuiteManifest

#: 1.1 adds ``verdicts`` (additive: a 1.0 reader ignores it, a 1.1 reader reads 1.0 files with none);
#: ``cost``, ``stopped``, ``timings`` and each endpoint's ``price`` / ``budget`` came later, additively (absent in
#: older files).
SCHEMA_VERSION = "1.1"


class Comparison(BaseModel):
    """Candidate minus reference on the same cases, with a CI for the difference and a paired test."""

    metric: str
    difference: Interval  # candidate - reference
    p_value: float | None = None  # two-sided, for the point null "no difference"
    test: str | None = None  # "mcnemar", "paired_bootstrap", "cluster_robust", ...
    #: What one unit of ``difference.n`` is ("calls both endpoints made", "cases", "scenarios"), and how many
    #: independent units the interval rests on (scenarios for agent trials, cases when cases repeat): the verdict
    #: calls a headline "not testable" below its stated minimum of independent units.
    unit: str | None = None
    independent_units: int | None = None


class Series(BaseModel):
    """Data for one chart (x/y with optional band), kept in the summary so reports re-render offline."""

    name: str
    x: list[float]
    y: list[float]
    low: list[float] | None = None
    high: list[float] | None = None
    x_label: str = ""
    y_label: str = ""


class Disagreement(BaseModel):
    """A case where a candidate differs from the reference; model text here is untrusted."""

    case_id: str
    kind: str  # e.g. "trigger", "tool_name", "arguments", "schema", "trajectory"
    reference: str | None = None
    candidate: str | None = None
    request_excerpt: str | None = None
    detail: str | None = None


class EndpointSuiteResult(BaseModel):
    """One endpoint's metrics on one suite. Metric names are stable identifiers (see README)."""

    endpoint: str
    suite: str
    kind: Literal["toolcall", "agent", "logprob", "cache"]
    is_reference: bool = False
    metrics: dict[str, Interval] = Field(default_factory=dict)
    comparisons: dict[str, Comparison] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)  # error classes, failure kinds, retries...
    series: list[Series] = Field(default_factory=list)
    disagreements: list[Disagreement] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # e.g. "cache not reported: field absent"
    extra: dict[str, Any] = Field(default_factory=dict)


class EndpointInfo(BaseModel):
    """An endpoint as published in results: no key, only the env var's name."""

    name: str
    base_url: str
    model: str | None = None
    api_key_env: str | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)
    is_reference: bool = False
    builtin: dict[str, Any] | None = None  # builtin engine options (kv dtype, weights) when it is one
    price: Price | None = None  # USD per 1M tokens, from the endpoints TOML
    budget: float | None = None  # USD, the endpoint's own budget
    claims: StatedClaims | None = None  # what the provider states about it (checked in RunSummary.claims)


class InputProblem(BaseModel):
    """A bad input line, named by file:line, counted in the summary.

    ``action`` says what became of the line: ``skipped`` (not run), or ``sent`` (run as written anyway, e.g.
    a tool schema that fails its metaschema: providers receive such schemas in real traffic).
    """

    source: str
    line: int | None = None
    message: str
    action: Literal["skipped", "sent"] = "skipped"


class MetricEvidence(BaseModel):
    """One headline metric of a candidate, as the verdict rule judged it (see docs/verdict.md)."""

    metric: str  # "trigger_f1", "schema_accuracy", "task_success", "forced_call_success", "kl_mean"
    suite: str
    value: Interval | None = None  # the candidate's own figure
    difference: Interval  # candidate - reference (trigger_f1: F1 - 1, kl_mean: the KL itself; see basis)
    basis: str  # how ``difference`` was obtained, e.g. "paired comparison (mcnemar)"
    test: str | None = None  # the significance test behind ``p_value`` (None: this metric cannot say "differs")
    p_value: float | None = None
    p_holm: float | None = None  # Holm-adjusted across this endpoint's headline tests
    significant: bool = False
    margin: float | None = None  # equivalence margin from the policy (same unit as ``difference``)
    p_equivalence: float | None = None  # two one-sided tests: the larger of the two p-values
    equivalent: bool = False
    cases_to_settle: int | None = None  # more cases that would likely settle it, if the observed difference holds
    # --- added with issue 38 (additive): each headline judged on its own unit against its margin, two-sided
    status: Literal["differs", "consistent", "inconclusive", "not testable"] | None = None  # this metric's reading
    unit: str | None = None  # what one unit of the difference is ("calls both endpoints made", "scenarios", ...)
    independent_units: int | None = None  # how many independent units the interval rests on
    min_units: int | None = None  # the policy's minimum; below it the metric is "not testable"
    bound: Literal["estimate", "lower"] = "estimate"  # "lower": a lower bound (top-k KL): can differ, never consistent
    material: bool = False  # the policy calls any significant difference material (point null, not the margin)
    p_outside: float | None = None  # two-sided test of H0 |difference| <= margin (or the point null when material)
    reason: str | None = None  # why not testable / how the interval was treated (zero width, legacy figure)
    tail_mass: float | None = None  # KL lower bound: the reference's probability mass beyond its top-k (mean)


class FingerprintEvidence(BaseModel):
    """The KL fingerprint as the verdict read it: which profile, and by how much it beats the reference's."""

    suite: str
    profile: str  # the closest profile, or "unknown" / "no profiles"
    distance: float | None = None
    reference_profile: str
    reference_distance: float | None = None
    margin: float
    names_other: bool = False  # a non-reference profile, ahead of the reference profile by at least ``margin``
    # --- added with issue 38 (additive): the fingerprint in the same error budget (Holm family) as the metrics
    p_value: float | None = None  # A/A-calibrated chance of a gap this large when the endpoint serves the reference
    false_alarm_rate: float | None = None  # the measured A/A false-alarm rate of "names another profile"
    p_holm: float | None = None  # Holm-adjusted in the endpoint's family of headline tests
    significant: bool = False  # names another profile and p_holm <= alpha: enough for "differs"


class Verdict(BaseModel):
    """Does the candidate serve the reference's model the same way? One answer with the evidence it rests on."""

    endpoint: str
    reference: str
    status: Literal["consistent", "differs", "inconclusive"]
    headline: str  # one sentence a person can paste into a ticket
    evidence: list[MetricEvidence] = Field(default_factory=list)
    fingerprint: FingerprintEvidence | None = None
    alpha: float = 0.05
    cases_to_settle: int | None = None  # inconclusive only: more units (of the slowest open metric) likely to settle it
    rule: str = "docs/verdict.md"
    #: Added with issue 38 (additive): cautions a reader must see with the answer, e.g. that judging this run again
    #: after adding cases is a second look that needs the sequential (anytime-valid) mode.
    warnings: list[str] = Field(default_factory=list)
    not_testable: list[str] = Field(default_factory=list)  # headline metrics below their minimum of independent units


class TokenCost(BaseModel):
    """Tokens the provider reported and what they cost at the endpoint's price (OpenAI convention: prompt
    includes cached). ``usd`` is None without a price. ``requests`` counts exchanges; ``with_usage`` those whose
    reply reported usage (the denominator of the token sums)."""

    requests: int = 0
    with_usage: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    usd: float | None = None


class EndpointCost(TokenCost):
    """One endpoint's cost over the run; ``suites`` breaks it down (history keeps the per-suite means)."""

    without_usage: int = 0  # replies (HTTP 2xx) that reported no usage: not in the sums
    without_usage_examples: list[str] = Field(default_factory=list)  # "suite/case_id" of the first few
    retried_billed: int = 0  # retried attempts whose usage is included (the provider reported it, so billed it)
    charged_usd: float | None = None  # what the budget ledger settled (reservations kept where no usage came)
    price: Price | None = None
    suites: dict[str, TokenCost] = Field(default_factory=dict)
    plan_usd: float | None = None  # what ``--dry-run --out`` the same folder expected (its plan.json), if it did
    plan_usd_high: float | None = None


class StopInfo(BaseModel):
    """Why the run stopped before sending everything: ``reason`` "budget" (a cap would have been passed) or
    "settled" (``--sequential``: every headline of the candidates in ``cases`` was settled early). When both happen
    the budget is the reason (it ended the sending) and ``settled`` keeps the sequential counts."""

    reason: str
    refused: int = 0  # requests not sent (they are not in records.jsonl; --resume sends them)
    caps: list[dict[str, Any]] = Field(default_factory=list)  # {"cap", "limit_usd", "committed_usd", "exhausted"}
    endpoints: dict[str, dict[str, Any]] = Field(default_factory=dict)  # name -> {"refused", "spent_usd"}
    cases: dict[str, int] | None = None  # settled: cases each endpoint answered in the sequential suites
    of: dict[str, int] | None = None  # settled: cases each sequential suite has
    open: list[str] | None = None  # settled: candidates still open when the suite ran out
    settled: dict[str, Any] | None = None  # budget and settled both: the sequential block


class ClaimCheck(BaseModel):
    """One stated claim of an endpoint against what the run measured (verifier/run/claims.py).

    ``contradicts`` only on confident evidence; ``not checked`` whenever the run had none (and ``evidence`` says
    why, plainly), so a missing measurement never reads as agreement.
    """

    claim: str  # quantization, kv_cache, decode_weights, context_length, implicit_caching, supported_parameters:NAME
    stated: Any
    measured: Any = None
    status: Literal["agrees", "contradicts", "not checked"]
    evidence: str


class SummaryFileError(ValueError):
    """``summary.json`` cannot be read or does not hold a RunSummary; one line naming the file (and the field)."""


class SequentialHeadline(BaseModel):
    """One headline under ``--sequential``: its anytime-valid decision and the confidence sequence behind it."""

    metric: str
    status: Literal["differs", "consistent", "open"]
    units: int  # independent units (cases) the decision rests on
    estimate: float | None = None  # mean paired difference, candidate minus reference (per case)
    low: float | None = None  # confidence sequence at the headline's differs level (Bonferroni across headlines)
    high: float | None = None
    margin: float | None = None
    settled_at: int | None = None  # cases sent when it settled (a look)
    p_value: float | None = None  # anytime-valid p of the point null (always-material metrics), 1 / max e


class SequentialResult(BaseModel):
    """One candidate on one suite under ``--sequential``: cases used of the suite, and each headline's decision."""

    suite: str
    endpoint: str
    cases: int  # cases this candidate answered (the look it stopped at, or the suite's size)
    of: int  # cases in the suite
    look_every: int
    settled: bool
    headlines: list[SequentialHeadline] = Field(default_factory=list)


class SuiteTiming(BaseModel):
    """One suite's sending: wall seconds from its first request to its last reply, and the exchanges it made."""

    suite: str
    seconds: float
    exchanges: int


class RunTimings(BaseModel):
    """Where a run's wall time went, in seconds, so a slow run can be explained (``benchmarks/default_run.py``).

    Measured by the runner; the time before it (imports, argument parsing) and after it (history index, report,
    exit) is what a caller measures around ``started_unix`` and ``finished_unix``. Wall clock, not CPU: the phases
    of a run on a busy machine take longer, so compare runs made under the same conditions.
    """

    started_unix: float  # the runner began: inputs checked from here
    finished_unix: float  # scored, just before summary.json is written
    engines_s: float = 0.0  # starting the built-in engines until all answer (0 without built-ins)
    preflight_s: float = 0.0  # every endpoint reachable, key accepted, model served
    suites: list[SuiteTiming] = Field(default_factory=list)  # in the order they ran
    probes_s: float = 0.0  # context and response-format probes after the suites
    scoring_s: float = 0.0  # scoring after the last suite: verdicts, claims, and what early scoring had not done


class RunSummary(BaseModel):
    schema_version: str = SCHEMA_VERSION
    run_id: str
    started_at: str
    finished_at: str | None = None
    verifier_version: str
    reference: str
    endpoints: list[EndpointInfo]
    suites: list[SuiteManifest]
    results: list[EndpointSuiteResult] = Field(default_factory=list)
    input_problems: list[InputProblem] = Field(default_factory=list)
    settings: dict[str, Any] = Field(default_factory=dict)
    fingerprints: dict[str, Any] = Field(default_factory=dict)  # endpoint -> closest quantization profile
    verdicts: dict[str, Verdict] = Field(default_factory=dict)  # candidate endpoint -> verdict (schema 1.1)
    cost: dict[str, EndpointCost] = Field(default_factory=dict)  # endpoint -> reported tokens and USD
    #: why the run sent fewer requests than planned: a budget cap (``reason`` "budget") or ``--sequential`` settling
    #: every candidate early (``reason`` "settled"); None when it sent everything
    stopped: StopInfo | None = None
    claims: dict[str, list[ClaimCheck]] = Field(default_factory=dict)  # endpoint -> its stated claims, checked
    sequential: list[SequentialResult] = Field(default_factory=list)  # ``--sequential``: decisions per candidate
    timings: RunTimings | None = None  # where the wall time went (None for a merged run, and in older files)

    @classmethod
    def read(cls, run_dir: Path) -> RunSummary:
        """``run_dir/summary.json``, or a :class:`SummaryFileError` naming the file and the first bad field."""
        path = Path(run_dir) / "summary.json"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SummaryFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "(root)"
            raise SummaryFileError(f"{path}: field {loc}: {err['msg']}") from exc

    def result(self, endpoint: str, suite: str) -> EndpointSuiteResult | None:
        for r in self.results:
            if r.endpoint == endpoint and r.suite == suite:
                return r
        return None


if __name__ == "__main__":
    print(json.dumps(RunSummary.model_json_schema(), indent=2))
