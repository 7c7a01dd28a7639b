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

from verifier.records import Interval, SuiteManifest

#: 1.1 adds ``verdicts`` (additive: a 1.0 reader ignores it, a 1.1 reader reads 1.0 files with none).
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


class FingerprintEvidence(BaseModel):
    """The KL fingerprint as the verdict read it: which profile, and by how much it beats the reference's."""

    suite: str
    profile: str  # the closest profile, or "unknown" / "no profiles"
    distance: float | None = None
    reference_profile: str
    reference_distance: float | None = None
    margin: float
    names_other: bool = False  # a non-reference profile, ahead of the reference profile by at least ``margin``


class Verdict(BaseModel):
    """Does the candidate serve the reference's model the same way? One answer with the evidence it rests on."""

    endpoint: str
    reference: str
    status: Literal["consistent", "differs", "inconclusive"]
    headline: str  # one sentence a person can paste into a ticket
    evidence: list[MetricEvidence] = Field(default_factory=list)
    fingerprint: FingerprintEvidence | None = None
    alpha: float = 0.05
    cases_to_settle: int | None = None  # inconclusive only: more cases (per suite) that would likely settle it
    rule: str = "docs/verdict.md"


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
    #: why the run sent fewer cases than planned: ``{"reason": "settled", "cases": {endpoint: int}, ...}``
    #: (``--sequential``); None when it sent every case
    stopped: dict[str, Any] | None = None
    sequential: list[SequentialResult] = Field(default_factory=list)  # ``--sequential``: decisions per candidate

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
