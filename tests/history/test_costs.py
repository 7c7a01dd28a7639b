"""History keeps what runs cost (schema 3): a version-2 file migrates keeping every row, cost rows index per run,
endpoint and suite, and ``cost_means`` / ``load_costs`` read them back (the dry run and the dashboard)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from reports.dashboard import render_dashboard
from tests.report.fixtures import make_summary
from verifier.history import SCHEMA_VERSION, cost_means, index_summary, load_costs, load_frame
from verifier.records import Price
from verifier.run.summary import EndpointCost, TokenCost

V1_DUMP = Path(__file__).parent / "data" / "history-v1.sql"


def _with_cost(run_id: str, started_at: str, completion: int):
    s, _ = make_summary(run_id=run_id, started_at=started_at, n=60)
    suite = s.suites[0].name
    s.cost = {"ref": EndpointCost(requests=10, with_usage=8, prompt_tokens=800, completion_tokens=completion,
                                  cached_tokens=100, usd=0.5, price=Price(input=1, output=2),
                                  suites={suite: TokenCost(requests=10, with_usage=8, prompt_tokens=800,
                                                           completion_tokens=completion, cached_tokens=100,
                                                           usd=0.5)})}
    return s, s.suites[0].content_hash


def _v2_file(tmp_path: Path) -> Path:
    """A version-2 history: the v1 dump migrated by the version-2 step only (what verifier wrote before costs)."""
    db = tmp_path / "v2.sqlite"
    with sqlite3.connect(db) as conn:
        conn.executescript(V1_DUMP.read_text())
        conn.execute("CREATE TABLE schema_info (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO schema_info VALUES ('schema_version', '2')")
        conn.execute("PRAGMA user_version = 2")
    return db


@pytest.mark.slow
def test_version_2_file_migrates_to_costs_keeping_rows_and_cost_reads_back(tmp_path: Path) -> None:
    db = _v2_file(tmp_path)
    before = len(load_frame(db, basis=None))
    assert load_costs(db) == [] and cost_means(db, "anything", "ref") is None  # read-only: no costs table yet
    s1, suite_hash = _with_cost("c1", "2026-03-01T02:00:00Z", completion=160)
    n = index_summary(s1, db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    assert len(load_frame(db, basis=None)) == before + n
    s2, _ = _with_cost("c2", "2026-03-02T02:00:00Z", completion=240)
    index_summary(s2, db)
    index_summary(s2, db)  # idempotent: re-indexing replaces the run's cost rows
    means = cost_means(db, suite_hash, "ref")
    assert means is not None and means.runs == 2 and means.requests == 16
    assert means.completion_tokens == (160 + 240) / 16 and means.prompt_tokens == 100.0
    assert cost_means(db, suite_hash, "other") is None
    points = load_costs(db)
    assert [(p.run_id, p.endpoint, p.usd, p.requests) for p in points] == [("c1", "ref", 0.5, 10),
                                                                          ("c2", "ref", 0.5, 10)]
    # the dashboard shows each run's cost per endpoint, with its denominator
    page = render_dashboard(db, tmp_path / "dash.html").read_text()
    assert page.count("$0.5000 (10 requests, 8 reported usage)") == 2
