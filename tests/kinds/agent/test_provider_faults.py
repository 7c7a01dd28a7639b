"""Provider faults are not model failures: an agent step that fails at the endpoint after all retries (a permanent
500, a hostile 200 body) ends its trial as an *endpoint error*, reported with its own count and rate and kept out of
task success, pass^k and divergence. The oracle policy solves every task, so any drop in task success or any
"<request failed>" disagreement here would be the provider's fault charged to the model.
"""

from __future__ import annotations

from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path

from tests.kinds.agent.conftest import open_context
from verifier.kinds.agent.kind import AGENT_KIND
from verifier.testing import FaultInjector, ScriptedServer
from verifier.testing.scripted_agent import OraclePolicy


async def test_permanent_provider_faults_are_endpoint_errors_not_failed_tasks(tmp_path: Path) -> None:
    options = {"trials": 2}
    suite = AGENT_KIND.load("agent-smoke", options)
    policy = OraclePolicy(suite.cases)
    faulty = FaultInjector(policy, {"permanent_500": 0.04, "hostile_body": 0.03}, seed=5)

    def responder(body, ctx):
        return faulty(body, ctx) if body.get("model") == "cand" else policy(body, ctx)

    with ScriptedServer(responder, models=["ref", "cand"]) as srv:
        async with AsyncExitStack() as stack:
            ctx = await open_context(stack, tmp_path / "run", srv.base_url, ["ref", "cand"], options)
            for c in ctx.clients.values():
                c.backoff_base = 0.001
            await AGENT_KIND.run(suite, ctx)
            records = ctx.store.read(kind="agent_step")
    assert faulty.injected["permanent_500"] > 0 and faulty.injected["hostile_body"] > 0, faulty.injected

    ref, cand = AGENT_KIND.score(suite, records, "ref", ["ref", "cand"])
    cand_recs = [r for r in records if r.endpoint == "cand"]
    stops = Counter(r.extra.get("stop_reason") for r in cand_recs if r.extra.get("stop_reason"))
    failed_trials = stops["endpoint_error"]
    assert failed_trials > 0, stops
    errors = Counter(r.error_class for r in cand_recs if not r.ok)
    assert errors["server_error"] > 0 and errors["malformed_response"] > 0, errors

    # endpoint errors: their own count and rate, with the finished trials as denominator
    n_trials = len(suite.cases) * 2
    assert cand.counts["endpoint_error_trials"] == failed_trials
    assert cand.counts["scored_trials"] == n_trials - failed_trials
    assert cand.metrics["endpoint_error_rate"].value == failed_trials / n_trials
    assert cand.metrics["endpoint_error_rate"].n == n_trials
    # ... and outside the model's metrics: the oracle solved every trial the provider let it finish
    # (its denominator is the scenarios with a scored trial: trials of one scenario are not independent)
    scored_scenarios = {r.case_id for r in cand_recs if r.extra.get("stop_reason") not in (None, "endpoint_error")}
    assert cand.metrics["task_success"].value == 1.0 and cand.metrics["task_success"].n == len(scored_scenarios)
    assert all(iv.value == 1.0 for k, iv in cand.metrics.items() if k.startswith("pass^"))
    assert cand.comparisons["task_success"].difference.value == 0.0
    assert not [d for d in cand.disagreements if "<request failed>" in (d.candidate or "")]
    assert cand.metrics["trajectory_divergence_step_median"].value is None
    assert any("endpoint error" in n for n in cand.notes)
    # request and error counts match records.jsonl
    assert cand.counts["requests"] == len(cand_recs)
    assert cand.counts["request_errors"] == sum(not r.ok for r in cand_recs)
    assert ref.counts["request_errors"] == 0 and ref.metrics["endpoint_error_rate"].value == 0.0
    assert ctx.progress.done == len(records) and ctx.progress.errors == sum(not r.ok for r in records)


async def test_a_lone_surrogate_in_a_reply_does_not_end_the_trial(tmp_path: Path) -> None:
    """A reply whose text holds ``\\ud83d`` alone (as JS/Java servers can send) is echoed back in the next request;
    no UTF-8 body can carry it, so before the fix every later step failed before it was sent."""
    import json

    suite = AGENT_KIND.load("agent-smoke", {})
    policy = OraclePolicy(suite.cases)

    def responder(body, ctx):
        reply = policy(body, ctx)
        if reply.tool_calls:
            reply.content = "thinking \ud83d"
            reply.tool_calls = [{**tc, "arguments": tc["arguments"] if isinstance(tc["arguments"], str)
                                 else json.dumps(tc["arguments"])} for tc in reply.tool_calls]
        return reply

    with ScriptedServer(responder, models=["ref"]) as srv:
        async with AsyncExitStack() as stack:
            ctx = await open_context(stack, tmp_path / "run", srv.base_url, ["ref"], {})
            await AGENT_KIND.run(suite, ctx)
            records = ctx.store.read(kind="agent_step")
    assert all(r.ok for r in records), Counter(r.error_class for r in records)
    assert any(r.content == "thinking \ud83d" for r in records)  # stored as sent: losslessly
    (res,) = AGENT_KIND.score(suite, records, "ref", ["ref"])
    assert res.metrics["task_success"].value == 1.0 and res.counts["endpoint_error_trials"] == 0
