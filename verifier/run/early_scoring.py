"""Score each suite on a worker thread as soon as its last exchange is recorded, while the next suite sends.

Why: scoring needs only the suite's own records, and it took seconds at the end of the default run (the logprob
fingerprint's A/A null simulation above all) on one core while the engines sat idle (issue #43). Started early, it
overlaps the next suite's sending, and the run's end waits only for what is not done yet. The scores are those
:func:`score_suite` computes at the end (same records, same code); a suite not scored early is scored then.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from verifier.records import ExchangeRecord
from verifier.run.store import RecordStore
from verifier.run.summary import EndpointSuiteResult

log = logging.getLogger(__name__)


@dataclass
class SuiteScore:
    """One suite's results, or the one-line reason scoring failed (the other suites are still scored)."""

    results: list[EndpointSuiteResult] = field(default_factory=list)
    failure: str | None = None


def score_suite(kind: Any, suite: Any, records: list[ExchangeRecord], reference: str, eps: list[str]) -> SuiteScore:
    """``kind.score`` over the suite's records; a scoring bug becomes a failure line, never a lost run."""
    try:
        return SuiteScore(results=kind.score(suite, records, reference, eps))
    except Exception as e:  # noqa: BLE001 - a scoring bug is reported, other suites still scored
        log.exception("scoring %s failed", suite.manifest.name)
        return SuiteScore(failure=f"suite '{suite.manifest.name}' failed while scoring: {type(e).__name__}: {e}")


class EarlyScorer:
    """Scores suites on daemon threads (a run that is interrupted does not wait for them); :meth:`take` waits."""

    def __init__(self, store: RecordStore, reference: str, eps: list[str]) -> None:
        self.store, self.reference, self.eps = store, reference, eps
        self._scores: dict[str, Future[SuiteScore]] = {}

    def submit(self, kind: Any, suite: Any) -> None:
        """Score ``suite`` now, from the records on disk: call it once its last exchange is recorded."""
        name = suite.manifest.name
        done: Future[SuiteScore] = Future()

        def work() -> None:
            try:
                done.set_result(score_suite(kind, suite, self.store.read(suite=name), self.reference, self.eps))
            except BaseException as e:  # noqa: BLE001 - e.g. a record file that cannot be read: raised by take()
                done.set_exception(e)

        self._scores[name] = done
        threading.Thread(target=work, name=f"verifier-score {name}", daemon=True).start()

    def take(self, name: str) -> SuiteScore | None:
        """The suite's score once it is done (None when it was never submitted)."""
        score = self._scores.pop(name, None)
        return None if score is None else score.result()
