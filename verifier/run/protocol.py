"""The contract between the runner and the suite kinds: what a kind receives, and what it must provide.

Why its own module: every kind (``verifier.kinds.*``) types its context against these names, and the runner
drives kinds through them; with the types beside the runner, kinds would import the runner they sit below.
The runner, the registry and the kinds import this module; it imports only the store, the client and the
records it names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from verifier.http.client import EndpointClient
from verifier.records import ExchangeRecord, SuiteManifest
from verifier.run.progress import Progress
from verifier.run.store import RecordStore
from verifier.run.summary import EndpointSuiteResult, InputProblem


@dataclass
class RunContext:
    """What a suite kind gets to do its work: clients by endpoint name, the store, and the run's settings."""

    run_dir: Path
    store: RecordStore
    clients: dict[str, EndpointClient]
    reference: str
    candidates: list[str]
    repeats: int
    seed: int
    progress: Progress
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def endpoints(self) -> list[str]:
        """Reference first, then candidates, each name once: the order kinds send in."""
        return list(dict.fromkeys([self.reference, *self.candidates]))


class LoadedSuiteLike(Protocol):
    """What every kind's ``load`` returns: the manifest that names exactly what runs, and the cases.

    ``problems`` (bad lines skipped or sent as written) is optional; the runner reads it with a default.
    """

    manifest: SuiteManifest
    cases: Any


@runtime_checkable
class SuiteKind(Protocol):
    """One per suite kind, listed in ``verifier.run.registry``.

    Optional attributes the runner honours: ``needs_reference_first: bool`` (run the reference to completion
    before any candidate, for kinds that compare against reference outputs while sending);
    ``planned_requests(suite, ctx) -> list[PlannedRequest]`` (``verifier.run.request_plan``: what ``--dry-run``
    prices; a kind without it is listed as not priced).
    """

    kind: str

    def load(self, ref: str, options: dict) -> LoadedSuiteLike: ...

    def planned_exchanges(self, suite: Any, ctx: RunContext) -> int: ...

    async def run(self, suite: Any, ctx: RunContext) -> None: ...

    def score(self, suite: Any, records: list[ExchangeRecord], reference: str,
              endpoints: list[str]) -> list[EndpointSuiteResult]: ...


def suite_problems(suite: LoadedSuiteLike) -> list[InputProblem]:
    """The input problems a loaded suite reports (bad lines skipped or sent as written); none when it has none."""
    return list(getattr(suite, "problems", []) or [])
