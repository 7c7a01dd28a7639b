"""The reference's repeats and response caches: the repeat misses a cache keyed on the body, a cache that ignores the
field is caught by the response id, and a floor of cached copies judges trigger F1 and argument agreement neither way.

Real parts: ``verifier run`` against scripted OpenAI-compatible servers on 127.0.0.1 that cache whole responses
keyed on the request body (as a gateway or proxy with a response cache does), and the built-in engine.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from typer.testing import CliRunner

from verifier.cli import app
from verifier.kinds.toolcall.checks import analyse
from verifier.kinds.toolcall.reference_repeats import CACHE_BUST_FIELD, CACHE_BUST_VALUE, MARKER, repeat_body
from verifier.kinds.toolcall.sequential_units import toolcall_units
from verifier.kinds.toolcall.suite_format import parse_case
from verifier.records import ExchangeRecord, ToolCall
from verifier.run.summary import RunSummary
from verifier.testing import Reply, RequestContext
from verifier.testing.scripted_server import completion_body

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CASES = [f"c{i:03d}" for i in range(120)]
FLOOR = ("trigger_f1", "argument_agreement")


def answer(body: dict) -> Reply:
    """A deterministic model: the same prompt gets the same reply (a call on two cases of three, else text)."""
    cid = body["messages"][-1]["content"]
    if int(cid[1:]) % 3:
        return Reply.tool_call("get_weather", {"city": f"city-{cid}"})
    return Reply.text(f"no tool needed for {cid}")


def fresh(body: dict, ctx: RequestContext) -> Reply:
    """No cache: every reply is generated again and gets a new id (the deterministic reference of today)."""
    return Reply(body=completion_body(answer(body), body, f"chatcmpl-{uuid.uuid4().hex}"))


class ResponseCache:
    """A provider's whole-response cache keyed on the request body minus ``ignore`` (and the transport fields).

    ``seen`` keeps every chat body that arrived, ``hits`` counts replies served from the cache (same body, same id).
    """

    def __init__(self, ignore: tuple[str, ...] = ()) -> None:
        self.ignore = ("stream", "stream_options", *ignore)
        self.cache: dict[str, dict[str, Any]] = {}
        self.seen: list[dict] = []
        self.hits = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict, ctx: RequestContext) -> Reply:
        key = json.dumps({k: v for k, v in body.items() if k not in self.ignore}, sort_keys=True)
        with self._lock:
            self.seen.append(body)
            if key in self.cache:
                self.hits += 1
            else:
                self.cache[key] = completion_body(answer(body), body, f"chatcmpl-{uuid.uuid4().hex}")
            return Reply(body=self.cache[key])


def _suite(tmp_path: Path) -> Path:
    path = tmp_path / "cachebust.jsonl"
    path.write_text("".join(json.dumps({"messages": [{"role": "user", "content": cid}], "tools": [WEATHER],
                                        "temperature": 0, "stream": False, "_meta": {"id": cid}}) + "\n"
                            for cid in CASES))
    return path


def _run(tmp_path: Path, ref_url: str, cand_url: str, *more: str) -> tuple[Path, RunSummary]:
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--reference", f"ref={ref_url}", "--endpoint", f"cand={cand_url}",
                                   "--suite", str(_suite(tmp_path)), "--reference-repeat-share", "1", "--no-stream",
                                   "--out", str(out), "--no-history", "--quiet", *more], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out, RunSummary.model_validate_json((out / "summary.json").read_text())


def _statuses(summary: RunSummary) -> dict[str, str | None]:
    return {e.metric: e.status for e in summary.verdicts["cand"].evidence}


def test_repeat_body_changes_only_the_user_field() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER], "temperature": 0}
    again = repeat_body(body)
    assert list(again) == [*body, CACHE_BUST_FIELD] and {k: v for k, v in again.items() if k != "user"} == body
    assert again["user"] == CACHE_BUST_VALUE and "user" not in body  # the first request is untouched
    owned = repeat_body({**body, "user": "alice"})
    assert owned["user"] == f"alice/{CACHE_BUST_VALUE}" and list(owned) == [*body, "user"]


def test_repeats_miss_a_cache_keyed_on_the_body_and_a_deterministic_reference_stays_consistent(
        tmp_path: Path, scripted_server) -> None:
    """(a) The server caches by body. Each repeated case arrives as two bodies that differ only in ``user``, so
    nothing is served from the cache; a deterministic reference (same reply, new id) gives a floor of 1 and the
    identical candidate is ``consistent`` on both floor headlines, with no warning."""
    cache = ResponseCache()
    ref, cand = scripted_server(cache), scripted_server(fresh)
    out, summary = _run(tmp_path, ref.base_url, cand.base_url)

    by_case: dict[str, list[dict]] = {}
    for body in cache.seen:
        by_case.setdefault(body["messages"][-1]["content"], []).append(body)
    assert sorted(by_case) == CASES and all(len(v) == 2 for v in by_case.values())
    for first, second in by_case.values():
        if "user" in first:
            first, second = second, first
        assert "user" not in first and second["user"] == CACHE_BUST_VALUE
        assert {k: v for k, v in second.items() if k != "user"} == first  # the same question, byte for byte
    assert cache.hits == 0

    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    firsts = {r["case_id"]: r for r in recs if r["endpoint"] == "ref" and MARKER not in r["extra"]}
    again = [r for r in recs if MARKER in r["extra"]]
    assert len(again) == len(CASES) and all(r["request_hash"] != firsts[r["case_id"]]["request_hash"] for r in again)

    r_ref, r_cand = summary.result("ref", "cachebust"), summary.result("cand", "cachebust")
    assert r_ref is not None and r_cand is not None
    assert "reference_floor_cache" not in r_cand.extra and "cache" not in r_ref.extra["reference_repeats"]
    assert r_ref.metrics["reference_repeat_differs"].value == 0  # deterministic: same tokens, new ids
    statuses = _statuses(summary)
    assert statuses["trigger_f1"] == statuses["argument_agreement"] == "consistent"
    assert summary.verdicts["cand"].status == "consistent" and not summary.verdicts["cand"].warnings


def test_a_cache_that_ignores_the_field_is_caught_and_the_floor_headlines_are_not_judged(
        tmp_path: Path, scripted_server) -> None:
    """(b) The same run, but the cache ignores ``user`` (what today's byte-identical repeats would meet): every
    repeat comes back with the first answer's id. The warning names the count in summary.json and the report,
    and neither floor headline is ``consistent``: the verdict is inconclusive."""
    cache = ResponseCache(ignore=("user",))
    ref, cand = scripted_server(cache), scripted_server(fresh)
    out, summary = _run(tmp_path, ref.base_url, cand.base_url)
    assert cache.hits == len(CASES)

    warning = (f"reference repeats served from a response cache: {len(CASES)} of {len(CASES)} share the first "
               f"answer's response id")
    r_ref, r_cand = summary.result("ref", "cachebust"), summary.result("cand", "cachebust")
    assert r_ref is not None and r_cand is not None
    assert r_cand.extra["reference_floor_cache"]["cached"] == len(CASES)
    assert r_cand.extra["reference_floor_cache"]["not_a_measurement"] is True
    assert r_ref.counts["reference_repeat_cached"] == len(CASES)
    assert any(n.startswith(warning) for n in r_cand.notes) and any(n.startswith(warning) for n in r_ref.notes)
    for metric in FLOOR:
        assert "response cache" in (r_cand.comparisons[metric].test or "")

    verdict = summary.verdicts["cand"]
    statuses = _statuses(summary)
    assert statuses["trigger_f1"] == statuses["argument_agreement"] == "inconclusive"
    assert statuses["schema_accuracy"] == "consistent"  # a headline without the floor is judged as before
    assert verdict.status == "inconclusive" and any(w.startswith(warning) for w in verdict.warnings)
    assert "not judged: the reference's floor came from a response cache" in verdict.headline
    for e in verdict.evidence:
        if e.metric in FLOOR:
            assert e.reason is not None and e.reason.startswith(warning) and not e.equivalent and not e.significant

    page = (out / "report.html").read_text(encoding="utf-8")
    assert f"Warning: {escape(warning)}" in page  # with the headline, and once among the suite's notes
    assert page.count(str(escape(warning))) == 2 and "ignores the 'user'" not in page  # escaped, never raw


def test_a_sequential_run_does_not_judge_the_floor_headlines_on_a_cached_floor(tmp_path: Path, scripted_server) -> None:
    """``--sequential``: the two floor headlines are not in the sequential set, so no look can call them settled;
    the verdict keeps the fixed-n reading that says why, and the warning."""
    ref, cand = scripted_server(ResponseCache(ignore=("user",))), scripted_server(fresh)
    _, summary = _run(tmp_path, ref.base_url, cand.base_url, "--sequential", "--look-every", "30")
    assert [h.metric for q in summary.sequential for h in q.headlines] == ["schema_accuracy"]
    verdict = summary.verdicts["cand"]
    assert verdict.status == "inconclusive" and verdict.warnings
    for e in verdict.evidence:
        if e.metric in FLOOR:
            assert e.status == "inconclusive" and (e.reason or "").startswith("reference repeats served from a")


def test_a_constant_response_id_is_not_read_as_a_cache(tmp_path: Path, scripted_server) -> None:
    """A server that sends one id for every reply (some do) cannot be judged by ids: no warning, judged as today."""
    def constant(body: dict, ctx: RequestContext) -> Reply:
        return Reply(body=completion_body(answer(body), body, "chatcmpl-constant"))

    ref, cand = scripted_server(constant), scripted_server(fresh)
    _, summary = _run(tmp_path, ref.base_url, cand.base_url)
    r_cand = summary.result("cand", "cachebust")
    assert r_cand is not None and "reference_floor_cache" not in r_cand.extra
    assert _statuses(summary)["trigger_f1"] == "consistent"


def _record(cid: str, endpoint: str, rid: str, *, repeat_of: bool = False) -> ExchangeRecord:
    call = ToolCall(id="call_0", name="get_weather", arguments=json.dumps({"city": cid}))
    return ExchangeRecord(request_hash="h", kind="toolcall", suite="s", case_id=cid, endpoint=endpoint, status=200,
                          finish_reason="tool_calls", tool_calls=[call], response={"id": rid},
                          repeat=1 if repeat_of else 0, extra={MARKER: 0} if repeat_of else {})


@pytest.mark.parametrize("copies,judged", [(0, True), (5, True), (6, False), (60, False)])
def test_sequential_set_leaves_out_the_floor_headlines_when_the_floor_is_cached(copies: int, judged: bool) -> None:
    """``--sequential``: with 10 % or more of the 60 repeats carrying the first answer's id, trigger F1 and argument
    agreement are not in the sequential set (the fixed-n reading says why); below it they are."""
    ids = [f"c{i}" for i in range(60)]
    cases = [parse_case({"messages": [{"role": "user", "content": c}], "tools": [WEATHER], "_meta": {"id": c}},
                        "mem", None) for c in ids]
    recs = [_record(c, "ref", f"r-{c}") for c in ids] + [_record(c, "cand", f"c-{c}") for c in ids]
    recs += [_record(c, "ref", f"r-{c}" if i < copies else f"again-{c}", repeat_of=True) for i, c in enumerate(ids)]
    assert analyse(recs[-1], cases[-1]).ok
    metrics = [u.metric for u in toolcall_units(cases, ids, recs, "ref", "cand")]
    assert ("trigger_f1" in metrics and "argument_agreement" in metrics) is judged
    assert "schema_accuracy" in metrics


def test_the_engine_reads_a_repeat_as_the_same_request() -> None:
    """The built-in engine's request model takes every built-in smoke case's repeat body, and what it parses from
    it is the first request's, ``user`` aside (metadata: it never reaches the prompt or the sampler)."""
    from reference_engine.protocol import ChatCompletionRequest
    from verifier.run.registry import load_suite

    _, suite = load_suite("toolcall-smoke", {})
    assert suite.cases
    for case in suite.cases:
        body = {**case.body, "model": "tiny"}
        first = ChatCompletionRequest.model_validate_json(json.dumps(body))
        again = ChatCompletionRequest.model_validate_json(json.dumps(repeat_body(body)))
        assert again.user == CACHE_BUST_VALUE and first.user is None
        assert again.model_dump(exclude={"user"}) == first.model_dump(exclude={"user"})


@pytest.mark.slow
def test_the_builtin_engine_answers_repeats_that_carry_the_field(tmp_path: Path) -> None:
    """(c) The built-in engine accepts ``user`` (metadata that changes nothing) on the repeats: every exchange is a
    200, the repeats are marked, and no cache is reported (its ids are new per request)."""
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--reference", "builtin:tiny", "--suite", "toolcall-smoke", "--limit", "4",
                                   "--reference-repeat-share", "1", "--no-history", "-q", "--out", str(out)],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    again = [r for r in recs if MARKER in r["extra"]]
    assert again and len(recs) == 2 * len(again) and all(r["status"] == 200 for r in recs)
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    ref = summary.result("reference", "toolcall-smoke")
    assert ref is not None and "cache" not in ref.extra["reference_repeats"]
    assert ref.counts["reference_repeat_cases"] == 4
