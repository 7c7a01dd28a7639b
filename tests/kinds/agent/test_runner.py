"""The agent loop end to end: scripted oracle agent behind a real loopback server, real client and store."""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from suites.agent import ENVIRONMENTS, scenario
from tests.kinds.agent.conftest import open_context
from verifier.kinds.agent.kind import AGENT_KIND, AgentOptions
from verifier.testing import Reply, ScriptedServer
from verifier.testing.scripted_agent import OraclePolicy


def write_specs(path: Path, specs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in specs))
    return path


async def run_suite(tmp_path: Path, responder, ref: str, options: dict, endpoints=("ref",), run_dir=None):
    suite = AGENT_KIND.load(ref, options)
    with ScriptedServer(responder, models=list(endpoints)) as srv:
        async with AsyncExitStack() as stack:
            ctx = await open_context(stack, run_dir or tmp_path / "run", srv.base_url, list(endpoints), options)
            await AGENT_KIND.run(suite, ctx)
            records = ctx.store.read(kind="agent_step")
        requests = srv.request_count
    return suite, ctx, records, requests


@pytest.mark.slow
async def test_scripted_agent_solves_every_horizon(tmp_path: Path) -> None:
    # every environment on the short rungs; the long rungs once each (they cost one request per step)
    specs = [{"env": e, "horizon": h} for e in sorted(ENVIRONMENTS) for h in (10, 25, 50)]
    specs += [{"env": "files", "horizon": 100}, {"env": "ledger", "horizon": 200}, {"env": "notes", "horizon": 500}]
    path = write_specs(tmp_path / "ladder.jsonl", specs)
    suite = AGENT_KIND.load(str(path), {})
    policy = OraclePolicy(suite.cases)
    # a window keeps prompts small at 500 steps; the scenarios stay solvable from recent turns
    _, ctx, records, _ = await run_suite(tmp_path, policy, str(path), {"window_tokens": 1500})
    (result,) = AGENT_KIND.score(suite, records, "ref", ["ref"])
    assert result.metrics["task_success"].value == 1.0
    assert result.metrics["task_success"].n == len(specs)
    assert result.counts["stop:final_answer"] == len(specs)
    assert result.metrics["step_validity"].value == 1.0
    for s in suite.cases:
        steps = [r for r in records if r.case_id == s.id]
        assert len(steps) == s.horizon + 1, s.id  # exactly the oracle's calls plus the final answer
        assert steps[-1].extra["success"] is True and steps[-1].extra["tool_calls_total"] == s.horizon
    long_steps = [r for r in records if r.case_id == "notes-h500-s0"]
    assert max(r.extra["messages"] for r in long_steps) < 60  # trimmed: system + goal + recent turns
    assert sum(r.extra["trimmed_turns"] for r in long_steps) > 400
    assert ctx.progress.done == len(records) and ctx.progress.errors == 0


async def test_builtin_smoke_suite_runs_against_two_endpoints(tmp_path: Path) -> None:
    suite = AGENT_KIND.load("agent-smoke", {"trials": 2})
    assert suite.manifest.kind == "agent" and suite.manifest.case_count == 3 * len(ENVIRONMENTS)  # seeds 0-2
    policy = OraclePolicy(suite.cases)
    _, ctx, records, _ = await run_suite(tmp_path, policy, "agent-smoke", {"trials": 2}, endpoints=("ref", "cand"))
    # oracle: horizon + 1 per trial, plus one refused first call where seeds share a goal and their worlds need
    # different first calls (the policy cannot tell those worlds apart before the first tool result)
    refused = [r for r in records if r.extra.get("error_kind") == "rejected"]
    assert all(r.step == 0 and r.extra["env"] == "files" for r in refused)
    assert AGENT_KIND.planned_exchanges(suite, ctx) + len(refused) == len(records)
    ref, cand = AGENT_KIND.score(suite, records, "ref", ["ref", "cand"])
    assert ref.metrics["pass^2"].value == 1.0 and cand.metrics["pass^2"].value == 1.0
    assert cand.metrics["trajectory_divergence_step_median"].value is None  # identical trajectories
    assert cand.comparisons["task_success"].difference.value == 0.0
    assert {r.repeat for r in records} == {0, 1}


async def test_stop_reasons_invalid_streak_and_budget(tmp_path: Path) -> None:
    path = write_specs(tmp_path / "s.jsonl", [{"env": "notes", "horizon": 10, "step_budget": 7}])
    suite = AGENT_KIND.load(str(path), {})
    _, _, recs, _ = await run_suite(tmp_path, OraclePolicy(suite.cases, error_rate=1.0), str(path),
                                    {"max_invalid_streak": 3}, run_dir=tmp_path / "a")
    assert len(recs) == 3 and recs[-1].extra["stop_reason"] == "invalid_streak"
    assert recs[-1].extra["success"] is False and recs[-1].extra["invalid_streak"] == 3
    assert {c["error_kind"] for r in recs for c in r.extra["calls"]} == {
        "malformed_json", "unknown_tool", "schema_violation"}
    _, _, recs, _ = await run_suite(tmp_path, OraclePolicy(suite.cases, never_finish=True), str(path), {},
                                    run_dir=tmp_path / "b")
    assert len(recs) == 7 and recs[-1].extra["stop_reason"] == "step_budget"


async def test_context_limit_error_trims_or_stops(tmp_path: Path) -> None:
    path = write_specs(tmp_path / "s.jsonl", [{"env": "tickets", "horizon": 25}])
    suite = AGENT_KIND.load(str(path), {})
    policy = OraclePolicy(suite.cases)

    def small_context(body: dict, ctx) -> Reply:
        if len(body["messages"]) > 12:
            return Reply.error(400, "This model's maximum context length is 2048 tokens.",
                               type_="invalid_request_error")
        return policy(body, ctx)

    _, _, recs, _ = await run_suite(tmp_path, small_context, str(path), {}, run_dir=tmp_path / "trim")
    assert recs[-1].extra["stop_reason"] == "final_answer" and recs[-1].extra["success"] is True
    assert any(r.extra.get("context_retries") for r in recs)
    assert max(r.extra["messages"] for r in recs) <= 12
    # the score says so, with its denominator: a trimmed agent did not face the same task as an untrimmed one
    (result,) = AGENT_KIND.score(suite, recs, "ref", ["ref"])
    assert result.counts["trimmed_trials"] == 1 and result.counts["trials"] == 1
    assert result.counts["dropped_turns"] == sum(r.extra["trimmed_turns"] for r in recs) > 0
    assert result.counts["context_resends"] == sum(r.extra.get("context_retries", 0) for r in recs) > 0
    assert any(n.startswith("1 of 1 trial(s) had their history trimmed") for n in result.notes)

    policy2 = OraclePolicy(suite.cases)
    _, _, recs, _ = await run_suite(
        tmp_path, lambda b, c: small_context(b, c) if len(b["messages"]) > 12 else policy2(b, c), str(path),
        {"on_context_error": "stop"}, run_dir=tmp_path / "stop")
    assert recs[-1].extra["stop_reason"] == "context_limit" and recs[-1].extra["success"] is False


async def _interrupted(tmp_path: Path) -> tuple[Path, list, list]:
    """A run cancelled while the 50-step ledger trial is under way (the 10-step tickets trial finished)."""
    path = write_specs(tmp_path / "s.jsonl", [{"env": "tickets", "horizon": 10}, {"env": "ledger", "horizon": 50}])
    suite = AGENT_KIND.load(str(path), {})
    run_dir = tmp_path / "run"
    with ScriptedServer(OraclePolicy(suite.cases), models=["ref"]) as srv:
        async with AsyncExitStack() as stack:
            ctx = await open_context(stack, run_dir, srv.base_url, ["ref"], {})
            task = asyncio.create_task(AGENT_KIND.run(suite, ctx))
            while len(ctx.store.read(kind="agent_step", suite=suite.manifest.name)) < 25:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    first = ctx.store.read(kind="agent_step")
    assert any(r.extra.get("stop_reason") for r in first if r.case_id == "tickets-h10-s0")
    assert not any(r.extra.get("stop_reason") for r in first if r.case_id == "ledger-h50-s0")
    return path, suite.cases, first


async def test_interrupted_trial_continues_where_it_stopped_and_finished_trials_are_not_resent(tmp_path: Path) -> None:
    """Resume with a fresh policy (a new process would have one, and a model server is stateless): the ledger
    trial's recorded steps are replayed, not re-sent; it continues at its first unrecorded step under the same
    attempt, so its records are those of one uninterrupted trial (51 steps: 50 calls and the final answer)."""
    path, cases, first = await _interrupted(tmp_path)
    done = sum(1 for r in first if r.case_id == "ledger-h50-s0")
    suite2, ctx2, records, requests = await run_suite(tmp_path, OraclePolicy(cases), str(path), {},
                                                      run_dir=tmp_path / "run")
    assert requests == 50 + 1 - done  # nothing sent twice
    ledger = [r for r in records if r.case_id == "ledger-h50-s0"]
    assert sorted(r.step for r in ledger) == list(range(51)) and {r.extra["attempt"] for r in ledger} == {0}
    (res,) = AGENT_KIND.score(suite2, records, "ref", ["ref"])
    assert res.metrics["task_success"].value == 1.0 and res.metrics["task_success"].n == 2
    assert res.counts["interrupted_attempts"] == 0


async def test_an_interrupted_trial_whose_records_cannot_be_replayed_restarts(tmp_path: Path) -> None:
    """Records without the fields a replay needs (an older run's) or that disagree with the replay: the trial
    restarts from scratch as a new attempt, and scoring uses the finished one."""
    path, cases, first = await _interrupted(tmp_path)
    lines = (tmp_path / "run" / "records.jsonl").read_text().splitlines()
    kept = []
    for line in lines:  # the ledger steps lose 'window', as records written before the replay existed
        rec = json.loads(line)
        if rec.get("case_id") == "ledger-h50-s0":
            rec["extra"].pop("window", None)
        kept.append(json.dumps(rec))
    (tmp_path / "run" / "records.jsonl").write_text("\n".join(kept) + "\n")
    suite2, ctx2, records, requests = await run_suite(tmp_path, OraclePolicy(cases), str(path), {},
                                                      run_dir=tmp_path / "run")
    assert requests == 50 + 1
    ledger = [r for r in records if r.case_id == "ledger-h50-s0"]
    assert {r.extra["attempt"] for r in ledger} == {0, 1}
    (res,) = AGENT_KIND.score(suite2, records, "ref", ["ref"])
    assert res.metrics["task_success"].value == 1.0 and res.counts["interrupted_attempts"] == 1


def test_options_are_validated() -> None:
    assert AgentOptions.parse({"horizon": "10,25", "trials": "3"}).horizons == [10, 25]
    with pytest.raises(ValueError, match="agent option trials"):
        AgentOptions.parse({"trials": "many"})
    with pytest.raises(ValueError, match="on_context_error"):
        AgentOptions.parse({"on_context_error": "panic"})
    with pytest.raises(ValueError, match="no scenario has horizon"):
        AGENT_KIND.load("agent-smoke", {"horizon": [500]})
    assert AGENT_KIND.load("agent-long", {"horizon": 25, "limit": 2}).manifest.case_count == 2


def test_registry_resolves_agent_suites_to_this_kind(tmp_path: Path) -> None:
    from verifier.run.registry import load_suite

    kind, suite = load_suite("agent-smoke", {"trials": 2})
    assert kind is AGENT_KIND and suite.manifest.name == "agent-smoke" and suite.manifest.source == "builtin"
    path = write_specs(tmp_path / "mine.jsonl", [{"env": "ledger", "horizon": 12, "seed": 4}])
    kind, suite = load_suite(f"agent:{path}", {})
    assert kind is AGENT_KIND and suite.manifest.name == "mine" and suite.cases[0].id == "ledger-h12-s4"


def test_conversation_trimming_keeps_head_and_latest_turn_with_hysteresis() -> None:
    from verifier.kinds.agent.kind import TRIM_TO, Conversation

    s = scenario("tickets", 10)
    conv = Conversation(s, s.make_env().tools())
    for i in range(30):
        conv.add_turn([{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "queue_size", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 200}])
    full = conv.estimate_tokens()
    assert conv.trim(full) == 0 and conv.trim(None) == 0  # fits: nothing dropped
    window = full - 10
    dropped = conv.trim(window)
    assert dropped > 1 and conv.estimate_tokens() <= window * TRIM_TO  # chunked, not one turn per step
    msgs = conv.messages()
    assert msgs[0]["role"] == "system" and msgs[1]["content"] == s.goal
    assert msgs[2]["role"] == "assistant" and msgs[-1]["tool_call_id"] == "c29"
    conv.trim(1)  # even an impossible window keeps the latest turn
    assert [m.get("tool_call_id") for m in conv.messages()[2:]] == [None, "c29"]


def test_context_errors_are_recognised_with_their_sizes() -> None:
    from verifier.kinds.agent.kind import context_error_sizes, is_context_error
    from verifier.records import Exchange

    vllm = Exchange(request_hash="h", status=400, error_class="client_error", error_message=(
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
        "(4744 tokens in the messages, 256 in the completion)."))
    engine = Exchange(request_hash="h", status=400, error_class="client_error", error_message=(
        "max_tokens (256) + prompt (1900 tokens) exceeds the context length 2048"))
    other = Exchange(request_hash="h", status=400, error_class="client_error", error_message="messages: bad role")
    assert is_context_error(vllm) and is_context_error(engine) and not is_context_error(other)
    assert context_error_sizes(vllm) == (4096, 4744) and context_error_sizes(engine) == (2048, 1900)
    assert not is_context_error(Exchange(request_hash="h", status=500, error_class="server_error",
                                         error_message="context length exceeded"))


async def test_valid_but_wrong_calls_fail_the_task_without_invalid_steps(tmp_path: Path) -> None:
    path = write_specs(tmp_path / "s.jsonl", [{"env": "tickets", "horizon": 10}])
    suite = AGENT_KIND.load(str(path), {})
    ref_policy, cand_policy = OraclePolicy(suite.cases), OraclePolicy(suite.cases, wrong_rate=1.0)

    def by_model(body: dict, ctx) -> Reply:
        return (ref_policy if body["model"] == "ref" else cand_policy)(body, ctx)

    _, _, recs, _ = await run_suite(tmp_path, by_model, str(path), {}, endpoints=("ref", "cand"))
    ref, cand = AGENT_KIND.score(suite, recs, "ref", ["ref", "cand"])
    assert cand.metrics["step_validity"].value == 1.0  # every call well-formed ...
    assert cand.metrics["task_success"].value == 0.0  # ... yet the task fails: wrong team every time
    assert cand.counts["stop:step_budget"] == 1
    # fetch_next has no argument to get wrong, so the trajectories part at the second step
    assert cand.metrics["trajectory_divergence_step_median"].value == 2.0
    first = cand.disagreements[0]
    assert first.reference.startswith("assign(") and first.candidate.startswith("assign(")


async def test_repeated_or_missing_tool_call_ids_are_made_unique(tmp_path: Path) -> None:
    path = write_specs(tmp_path / "s.jsonl", [{"env": "tickets", "horizon": 10}])

    def same_id(body: dict, ctx) -> Reply:
        ids = [tc["id"] for m in body["messages"] if m["role"] == "assistant" for tc in m["tool_calls"]]
        results = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
        if len(set(ids)) != len(ids) or ids != results:
            return Reply.error(400, f"ids not unique or unpaired: {ids} / {results}")
        if len(ids) >= 4:
            return Reply(content="stopping")
        return Reply(tool_calls=[{"name": "queue_size", "arguments": "{}", "id": "dup"},
                                 {"name": "queue_size", "arguments": "{}", "id": "dup"}])

    _, _, recs, _ = await run_suite(tmp_path, same_id, str(path), {})
    assert [r.extra.get("stop_reason") for r in recs] == [None, None, "final_answer"]
    assert all(r.extra["n_calls"] == 2 for r in recs[:2])


async def test_send_step_resends_at_most_three_times_with_a_narrowing_window() -> None:
    """The trim-and-resend policy that the runner and ``training.evaluate`` share: each context error narrows
    the window and drops turns, and the fourth refusal ends the step with the error, not a fifth send."""
    from verifier.kinds.agent.kind import MAX_CONTEXT_RETRIES, Conversation, send_step
    from verifier.records import Exchange

    conv = Conversation(scenario("tickets", 25, seed=1), tools=[])
    for i in range(40):
        conv.add_turn([{"role": "assistant", "content": f"step {i} " * 20}, {"role": "tool", "content": "ok " * 30}])
    sizes: list[int] = []

    async def refuse(body: dict) -> Exchange:
        sizes.append(len(body["messages"]))
        return Exchange(request_hash="x", status=400, error_class="client_error",
                        error_message="This model's maximum context length is 4096 tokens.")

    sent = await send_step(conv, refuse, {"max_tokens": 64}, window=None, max_tokens=64)
    assert len(sizes) == 1 + MAX_CONTEXT_RETRIES == 4
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]
    assert sent.context_retries == 3 and sent.dropped == conv.dropped > 0 and sent.messages == sizes[-1]
    assert sent.window is not None and sent.window < 4096 and "maximum context length" in sent.context_error
    assert not sent.exchange.ok
