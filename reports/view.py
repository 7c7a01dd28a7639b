"""The report's typed view-model: everything the page shows, already decided and formatted.

Why a view-model: analysis (gate, drift, verdicts, which disagreements are real, which charts say something) is
done once by :mod:`reports.compose` before rendering; :mod:`reports.render` only draws what it is given, so a
template change can never change a figure, and another section (cost, claims) is one more field plus a partial.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from reports.disclosure import DisclosureCard
from verifier.history.drift import DriftReport
from verifier.run.summary import RunSummary, Verdict

__all__ = [
    "Cell", "Chart", "Collapsed", "ComparisonRow", "DisagreementCount", "DisagreementView", "GateView", "Headline",
    "HistoryView", "MetricRow", "ReportView", "SuiteSection", "VerdictRow",
]

NOT_MEASURED = "not measured"


class Cell(BaseModel):
    """One figure as shown: text for value, CI and n, plus the policy mark when an absolute threshold applies."""

    metric: str
    suite: str | None = None
    value: str = NOT_MEASURED
    ci: str = ""
    n: int | None = None
    measured: bool = False
    status: str | None = None
    message: str = ""


class VerdictRow(BaseModel):
    """One endpoint's verdict-table figures (the table is drawn pivoted: a row per metric, a column per endpoint)."""

    endpoint: str
    model: str | None
    is_reference: bool
    status: str | None
    cells: list[list[Cell]]  # one list per column (several suites may measure the same metric)
    verdict: Verdict | None = None
    fingerprint_text: str = ""


class Headline(BaseModel):
    endpoint: str
    status: str  # consistent / differs / inconclusive / reference
    mark: str
    text: str
    evidence: list[str] = Field(default_factory=list)  # one line per headline metric, as the verdict states it
    usage: str = ""  # cases used, cost and a budget stop, beside the verdict (verifier.run.usage_line)
    limit: str = ""  # what a sequential stop left unsettled (trigger F1, argument agreement)
    #: the verdict's cautions not already in its headline (e.g. a reference floor served from a response cache)
    warnings: list[str] = Field(default_factory=list)


class MetricRow(BaseModel):
    metric: str
    label: str
    cells: list[Cell]  # one per endpoint
    glossary: bool = True


class ComparisonRow(BaseModel):
    endpoint: str
    metric: str
    label: str
    diff: str
    ci: str
    n: int
    p_value: str
    test: str


class Chart(BaseModel):
    id: str
    title: str
    svg: str
    caption: str = ""


class DisagreementView(BaseModel):
    endpoint: str
    suite: str
    case_id: str
    kind: str
    reference: str | None
    candidate: str | None
    request: str | None
    detail: str | None


class Collapsed(BaseModel):
    """A family of metrics shown as one line because every figure in it is zero or not measured."""

    family: str
    metrics: list[str]
    text: str


class DisagreementCount(BaseModel):
    endpoint: str
    total: int  # real disagreements (different outcomes)
    shown: int
    identical: int = 0  # flagged by scoring, but both replies the same: not counted, not shown


class SuiteSection(BaseModel):
    name: str
    kind: str
    version: str
    content_hash: str
    case_count: int
    endpoints: list[str]
    headline_rows: list[MetricRow]  # shown first
    other_rows: list[MetricRow]  # in the collapsed "all figures" block
    comparisons: list[ComparisonRow]
    charts: list[Chart]
    notes: list[tuple[str, str]]  # (endpoints sharing the note, note)
    counts: list[tuple[str, str, int]]
    disagreement_total: int
    disagreements_shown: int
    collapsed: list[Collapsed] = Field(default_factory=list)
    sentences: list[str] = Field(default_factory=list)  # figures a chart would not show better
    disagreement_counts: list[DisagreementCount] = Field(default_factory=list)


class HistoryView(BaseModel):
    charts: list[Chart] = Field(default_factory=list)
    drift: DriftReport | None = None
    db: str = ""


class GateView(BaseModel):
    """The gate's outcome and what it means, in words."""

    status: str
    policy: str  # as the policy names itself ("<default policy>" or a file path)
    policy_words: str  # what that policy judges
    decision: str
    decision_words: str
    absolute: bool  # any absolute threshold in force (only when a policy file asks)
    checks: list[Any] = Field(default_factory=list)  # verifier.history.gate.Check


class ReportView(BaseModel):
    """The whole page."""

    summary: RunSummary
    endpoints: list[dict[str, Any]]
    columns: list[tuple[str, str]]
    shown_columns: list[tuple[str, str]]
    hidden_columns: list[str]
    column_index: dict[str, int]
    rows: list[VerdictRow]
    headlines: list[Headline]
    marks: dict[str, str]
    alpha: float
    rule_words: list[str]
    glossary: dict[str, str]
    gate: GateView
    sections: list[SuiteSection]
    disagreements: list[DisagreementView]
    identical_dropped: int
    cards: list[DisclosureCard]
    history: HistoryView | None
    drift_tested: bool
    settings_text: list[tuple[str, str]]
    versions: dict[str, Any]
    extra_sections: list[tuple[str, str]] = Field(default_factory=list)  # (template partial, id): cost, claims, ...
    extra: dict[str, Any] = Field(default_factory=dict)  # data for extra_sections' partials
