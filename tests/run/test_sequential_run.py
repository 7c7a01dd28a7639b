"""``verifier run --sequential`` end to end on real loopback servers: early stops, the reference answering what the
candidates still need, the order in the manifest, and an exact ``--resume``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.run.forced_weather import forced_weather_suite as _suite
from verifier.cli import app
from verifier.records import ExchangeRecord
from verifier.run.store import RunManifest
from verifier.run.summary import RunSummary
from verifier.testing import FaultInjector, schema_responder


def _records(out: Path) -> list[ExchangeRecord]:
    return [ExchangeRecord.model_validate_json(x) for x in (out / "records.jsonl").read_text().splitlines()]


def _chats(*servers) -> int:
    return sum(1 for s in servers for method, path, _ in s.log
               if method == "POST" and path.endswith("/chat/completions"))


def _cases(recs: list[ExchangeRecord]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for r in recs:
        out.setdefault(r.endpoint, set()).add(r.case_id)
    return out


@pytest.mark.slow
def test_sequential_run_stops_each_candidate_early_and_resume_is_exact(tmp_path, scripted_server) -> None:
    ref, twin = scripted_server(schema_responder), scripted_server(schema_responder)
    bad = scripted_server(FaultInjector(schema_responder, {"schema_violation": 0.5}, seed=5))
    out = tmp_path / "run"
    res = CliRunner().invoke(app, [
        "run", "--reference", f"ref={ref.base_url}", "--endpoint", f"twin={twin.base_url}", "--endpoint",
        f"bad={bad.base_url}", "--suite", str(_suite(tmp_path, 300)), "--out", str(out), "--no-history", "-q",
        "--sequential", "--look-every", "50", "--seed", "4", "--reference-repeat-share", "1"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    summary = RunSummary.read(out)
    seq = {r.endpoint: r for r in summary.sequential}
    # every case answered twice by the reference (share 1), so trigger F1 and argument agreement, judged against its
    # floor, can settle inside the 300-case suite (with the default 10 % their 30 floor cases come too late)
    heads = {h.metric: h for h in seq["bad"].headlines}
    # the first differs settles the verdict: the candidate stops at the first look, whatever is still open then
    assert heads["schema_accuracy"].status == "differs" and heads["argument_agreement"].status == "differs"
    assert heads["schema_accuracy"].settled_at == 50  # half its calls invalid: differs at the first look
    assert heads["argument_agreement"].settled_at == 50  # half its arguments changed, the floor at 1
    assert {h.status for h in heads.values()} <= {"differs", "open"}
    assert seq["bad"].settled and seq["bad"].cases == 50
    assert f"SEQUENTIAL weather / bad: settled after {seq['bad'].cases} of 300 cases: schema_accuracy differs" in \
        res.output
    assert seq["twin"].settled and seq["twin"].cases < 300
    assert {h.metric: h.status for h in seq["twin"].headlines} == dict.fromkeys(heads, "consistent")
    assert summary.stopped is not None
    longest = max(seq["twin"].cases, seq["bad"].cases)
    cases = {"twin": seq["twin"].cases, "bad": seq["bad"].cases, "ref": longest}
    assert summary.stopped.model_dump(exclude_defaults=True) == {"reason": "settled", "cases": cases,
                                                                  "of": {"weather": 300}, "open": []}
    recs = _records(out)
    order = RunManifest.load(out).settings["sequential"]["order"]["weather"]
    assert sorted(order) == [f"w{i:03d}" for i in range(300)] and order != sorted(order)  # seeded shuffle
    cases = _cases(recs)
    assert cases["bad"] == set(order[: seq["bad"].cases]) and cases["twin"] == set(order[: seq["twin"].cases])
    assert cases["ref"] == set(order[:longest])  # the reference answered what a candidate still needed
    assert sum(1 for r in recs if r.endpoint == "ref" and "reference_repeat_of" in r.extra) == longest
    assert "order" not in summary.settings["sequential"]  # the order lives in the manifest only

    # kill mid-run: keep only the first 70 record lines, then --resume
    lines = (out / "records.jsonl").read_text().splitlines()
    (out / "records.jsonl").write_text("\n".join(lines[:70]) + "\n")
    before = _chats(ref, twin, bad)
    res = CliRunner().invoke(app, ["run", "--resume", str(out), "--no-history", "-q"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    sent = _chats(ref, twin, bad) - before
    assert sent == len(lines) - 70  # exactly the lost exchanges, nothing else
    again = _records(out)
    key = lambda r: (r.endpoint, r.case_id, r.repeat, r.variant)  # noqa: E731
    assert Counter(map(key, again)) == Counter(map(key, recs))  # same exchanges, none twice
    assert RunManifest.load(out).settings["sequential"]["order"]["weather"] == order
    assert RunSummary.read(out).stopped == summary.stopped


def test_without_sequential_every_case_is_sent_and_nothing_says_stopped(tmp_path, scripted_server) -> None:
    ref = scripted_server(schema_responder)
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--reference", f"ref={ref.base_url}", "--endpoint", f"c={ref.base_url}",
                                   "--suite", str(_suite(tmp_path, 60)), "--out", str(out), "--no-history", "-q"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    summary = RunSummary.read(out)
    assert summary.stopped is None and summary.sequential == []
    assert len(_cases(_records(out))["c"]) == 60


def test_look_every_without_sequential_is_refused_in_one_line(tmp_path) -> None:
    res = CliRunner().invoke(app, ["run", "--reference", "builtin:tiny", "--look-every", "20",
                                   "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "--look-every needs --sequential" in res.output
    assert not (tmp_path / "r").exists()
