"""The typed shape of ``summary.json``: the contract CI users, the report, the gate and history read.

Scoring modules (one per suite kind) each produce :class:`EndpointSuiteResult` objects; the run
assembles them into a :class:`RunSummary`. Its JSON Schema is published as ``docs/summary.schema.json``
(regenerate with ``python -m verifier.summary_model > docs/summary.schema.json``). Changes must be
additive; bump ``SCHEMA_VERSION`` on any breaking change.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from verifier.records import Interval, SuiteManifest

SCHEMA_VERSION = "1.0"


class Comparison(BaseModel):
    """Candidate minus reference on the same cases, with a CI for the difference and a paired test."""

    metric: str
    difference: Interval  # candidate - reference
    p_value: float | None = None
    test: str | None = None  # "mcnemar", "paired_bootstrap", "cluster_robust", ...


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

    def result(self, endpoint: str, suite: str) -> EndpointSuiteResult | None:
        for r in self.results:
            if r.endpoint == endpoint and r.suite == suite:
                return r
        return None


if __name__ == "__main__":
    print(json.dumps(RunSummary.model_json_schema(), indent=2))
