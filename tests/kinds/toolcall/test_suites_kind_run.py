"""The toolcall kind end to end against real loopback HTTP servers (the scripted OpenAI-compatible server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from verifier.http.client import EndpointClient
from verifier.records import EndpointConfig
from verifier.run.progress import Progress
from verifier.run.protocol import RunContext
from verifier.run.registry import load_suite
from verifier.run.store import RecordStore
from verifier.testing import FaultInjector, Reply, RequestContext, ScriptedServer


def oracle_for(suite: Any):
    """A responder that gives each case's expected answer (text when no tool fits)."""
    answers = {json.dumps(c.body["messages"], sort_keys=True): c.expected for c in suite.cases}

    def respond(body: dict, ctx: RequestContext) -> Reply:
        exp = answers.get(json.dumps(body["messages"], sort_keys=True))
        if exp is None:
            return Reply.text("Happy to help with that directly.")
        return Reply.tool_call(exp.tool, json.dumps(exp.arguments))

    return respond


def _ctx(tmp_path: Path, clients: dict[str, EndpointClient], **options: Any) -> RunContext:
    return RunContext(run_dir=tmp_path, store=RecordStore(tmp_path / "records.jsonl"), clients=clients, reference="ref",
                      candidates=["cand"], repeats=1, seed=0, progress=Progress(display=False), options=options)


def _client(name: str, srv: ScriptedServer) -> EndpointClient:
    return EndpointClient(EndpointConfig(name=name, base_url=srv.base_url, model="scripted-model", concurrency=8),
                          backoff_base=0.001, backoff_cap=0.01)


async def test_core_run_scores_injected_faults_exactly_and_resumes(tmp_path: Path) -> None:
    kind, suite = load_suite("toolcall-core", {"limit": 40})
    assert len(suite.cases) == 40 and "first 40 of 1200" in suite.manifest.source
    oracle = oracle_for(suite)
    faults = FaultInjector(oracle, rates={"500": 0.15, "malformed_args": 0.15, "schema_violation": 0.15}, seed=3)
    with ScriptedServer(oracle) as ref_srv, ScriptedServer(faults) as cand_srv:
        async with _client("ref", ref_srv) as ref, _client("cand", cand_srv) as cand:
            ctx = _ctx(tmp_path, {"ref": ref, "cand": cand})
            # 40 cases x 2 endpoints, and the reference answers every case twice (fewer than 50 cases)
            assert kind.planned_exchanges(suite, ctx) == 120 and len(suite.reference_repeat_ids) == 40
            await kind.run(suite, ctx)
            sent = (ref_srv.request_count, cand_srv.request_count)
            await kind.run(suite, ctx)  # resume: everything is on disk, nothing is sent again
            assert (ref_srv.request_count, cand_srv.request_count) == sent
            ctx.store.close()
    records = RecordStore(tmp_path / "records.jsonl").read(kind="toolcall")
    assert len(records) == 120 and len({r.key() for r in records}) == 120
    again = [r for r in records if "reference_repeat_of" in r.extra]
    assert len(again) == 40 and {(r.endpoint, r.repeat) for r in again} == {("ref", 1)}
    results = {r.endpoint: r for r in kind.score(suite, records, "ref", ["ref", "cand"])}
    ref_r, cand_r = results["ref"], results["cand"]

    assert ref_r.metrics["expected_case_accuracy"].value == 1.0
    assert ref_r.metrics["schema_accuracy"].value == 1.0
    inj = faults.injected
    assert inj["500"] > 0 and inj["malformed_args"] > 0 and inj["schema_violation"] > 0
    # 500s hit first attempts only, so every one was retried away
    assert cand_r.metrics["error_rate"].value == 0.0
    assert cand_r.counts["retries"] == inj["500"]
    assert cand_r.counts["schema_not_json"] == inj["malformed_args"]
    assert cand_r.counts["schema_schema_violation"] == inj["schema_violation"]
    n_calls = ref_r.counts["tool_calls"]
    assert cand_r.metrics["schema_accuracy"].value == pytest.approx(1 - (inj["malformed_args"]
                                                                         + inj["schema_violation"]) / n_calls)
    # corrupted arguments do not change finish_reason: triggering agrees perfectly
    assert cand_r.metrics["trigger_f1"].value == 1.0 and cand_r.metrics["tool_name_agreement"].value == 1.0
    assert cand_r.metrics["expected_case_accuracy"].value == pytest.approx(1 - (inj["malformed_args"]
                                                                                + inj["schema_violation"]) / 40)
    assert cand_r.counts["disagreements:schema"] == inj["malformed_args"] + inj["schema_violation"]
    assert ref_r.metrics["latency_p50_s"].n == 40  # the second answers count only for the floor
    assert ref_r.counts["requests"] == 80 and ref_r.counts["reference_repeat_cases"] == 40
    # the scripted reference is deterministic: its floor is 1, and the candidate's triggering matches it
    assert ref_r.metrics["reference_repeat_differs"].value == 0.0
    f1 = cand_r.comparisons["trigger_f1"]
    assert f1.difference.value == 0.0 and f1.difference.low < 0 < f1.difference.high and f1.p_value == 1.0
    args = cand_r.comparisons["argument_agreement"]
    assert args.difference.value < 0 and cand_r.metrics["argument_agreement_floor"].value == 1.0


def stream_only_bug(inner):
    """A provider whose streaming path drops the closing brace of tool arguments on every other case."""
    def respond(body: dict, ctx: RequestContext) -> Reply:
        reply = inner(body, ctx)
        if body.get("stream") and reply.tool_calls and int(ctx.body_hash, 16) % 2 == 0:
            for tc in reply.tool_calls:
                tc["arguments"] = tc["arguments"][:-1]
        return reply
    return respond


async def test_schemas_run_both_variants_side_by_side(tmp_path: Path) -> None:
    kind, suite = load_suite("toolcall-schemas", {"limit": 12})
    assert suite.variants == ("nonstream", "stream")
    oracle = oracle_for(suite)
    with ScriptedServer(oracle) as ref_srv, ScriptedServer(stream_only_bug(oracle)) as cand_srv:
        async with _client("ref", ref_srv) as ref, _client("cand", cand_srv) as cand:
            ctx = _ctx(tmp_path, {"ref": ref, "cand": cand})
            await kind.run(suite, ctx)
            ctx.store.close()
        bodies = [b for m, p, b in cand_srv.log if p.endswith("/chat/completions")]
    assert sum(1 for b in bodies if b.get("stream")) == 12 and len(bodies) == 24
    records = RecordStore(tmp_path / "records.jsonl").read(kind="toolcall")
    assert {r.variant for r in records} == {"stream", "nonstream"}
    assert all(r.stream == (r.variant == "stream") for r in records)
    results = {r.endpoint: r for r in kind.score(suite, records, "ref", ["ref", "cand"])}
    cand_r = results["cand"]
    broken = sum(1 for r in records if r.endpoint == "cand" and r.variant == "stream" and r.tool_calls
                 and not r.tool_calls[0].arguments.endswith("}"))
    assert broken > 0
    assert cand_r.metrics["schema_accuracy_nonstream"].value == 1.0
    assert cand_r.metrics["schema_accuracy_stream"].value == pytest.approx(1 - broken / 12)
    comp = cand_r.comparisons["stream_vs_nonstream_valid"]
    assert comp.difference.value == pytest.approx(-broken / 12) and comp.difference.n == 12
    assert results["ref"].metrics["ttft_p50_s"].n == 12  # TTFT only from streamed exchanges
    assert "schema_accuracy_by_feature" in cand_r.extra
