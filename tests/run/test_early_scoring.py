"""Suites scored while the next one sends: the same results as scoring at the end, and a scoring bug is one line."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from verifier.run.early_scoring import EarlyScorer
from verifier.run.store import RecordStore
from verifier.run.summary import EndpointSuiteResult


class Kind:
    def __init__(self, fail: bool = False) -> None:
        self.fail, self.thread = fail, ""

    def score(self, suite, records, reference, eps):
        self.thread = threading.current_thread().name
        if self.fail:
            raise ZeroDivisionError("division by zero")
        return [EndpointSuiteResult(endpoint=e, suite=suite.manifest.name, kind="cache", counts={"n": len(records)})
                for e in eps]


def suite(name: str) -> SimpleNamespace:
    return SimpleNamespace(manifest=SimpleNamespace(name=name))


def test_suites_are_scored_on_their_own_thread_and_a_bug_is_a_failure_line(tmp_path):
    store = RecordStore(tmp_path / "records.jsonl")
    early = EarlyScorer(store, "ref", ["ref", "cand"])
    good, bad = Kind(), Kind(fail=True)
    early.submit(good, suite("s1"))
    early.submit(bad, suite("s2"))
    one, two = early.take("s1"), early.take("s2")
    assert one is not None and [r.endpoint for r in one.results] == ["ref", "cand"] and one.failure is None
    assert good.thread == "verifier-score s1"
    assert two is not None and two.results == []
    assert two.failure == "suite 's2' failed while scoring: ZeroDivisionError: division by zero"
    assert early.take("s1") is None and early.take("never") is None  # taken once; never submitted: scored at the end
