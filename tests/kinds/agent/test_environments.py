"""Environments: determinism, exact horizons, error results, state transitions and success checks."""

from __future__ import annotations

import json

import pytest

from suites.agent import ENVIRONMENTS, HORIZONS, builtin_suite, content_hash, load_scenario_file, make_env, scenario
from suites.agent.base import MALFORMED, REJECTED, SCHEMA, UNKNOWN_TOOL

ENV_NAMES = sorted(ENVIRONMENTS)


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_tools_are_openai_format_with_strict_schemas(env_name: str) -> None:
    tools = make_env(env_name, 0, 10).tools()
    assert 4 <= len(tools) <= 10
    for t in tools:
        assert t["type"] == "function"
        fn = t["function"]
        assert fn["name"] and fn["description"]
        assert fn["parameters"]["type"] == "object"
        assert fn["parameters"]["additionalProperties"] is False


@pytest.mark.parametrize("env_name", ENV_NAMES)
@pytest.mark.parametrize("horizon", HORIZONS[:4])
def test_oracle_needs_exactly_horizon_calls_and_succeeds(env_name: str, horizon: int) -> None:
    env = make_env(env_name, 3, horizon)
    assert not env.check()
    assert env.solve() == horizon
    assert env.check()
    assert env.next_action() is None


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_same_seed_same_world_and_results(env_name: str) -> None:
    a, b = make_env(env_name, 7, 25), make_env(env_name, 7, 25)
    assert a.state_digest() == b.state_digest()
    assert a.goal() == b.goal()
    results_a, results_b = [], []
    while (act := a.next_action()) is not None:
        results_a.append(a.run_action(act).result_text)
        results_b.append(b.run_action(b.next_action()).result_text)
    assert results_a == results_b
    assert make_env(env_name, 8, 25).state_digest() != a.state_digest()


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_invalid_calls_get_error_results_and_do_not_change_state(env_name: str) -> None:
    env = make_env(env_name, 1, 10)
    before = env.state_digest()
    name = env.next_action().name
    bad_json = env.call(name, '{"oops": ')
    unknown = env.call("no_such_tool", "{}")
    not_object = env.call(name, "[1, 2]")
    extra_key = env.call(name, json.dumps({"surprise": 1}))
    assert (bad_json.valid, bad_json.error_kind) == (False, MALFORMED)
    assert (unknown.valid, unknown.error_kind) == (False, UNKNOWN_TOOL)
    assert (not_object.valid, not_object.error_kind) == (False, MALFORMED)
    assert (extra_key.valid, extra_key.error_kind) == (False, SCHEMA)
    for o in (bad_json, unknown, not_object, extra_key):
        assert o.result_text.startswith("error:")
    assert env.state_digest() == before
    assert [e.error_kind for e in env.events] == [MALFORMED, UNKNOWN_TOOL, MALFORMED, SCHEMA]
    # after the errors the oracle still finishes the task: recovery is possible
    env.solve()
    assert env.check()


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_arguments_that_are_not_text_are_a_malformed_call(env_name: str) -> None:
    """``env.call`` with arguments that are no string (a library caller's parsed dict, a None) is an error result
    like any malformed call; it used to raise AttributeError from the error message itself."""
    env = make_env(env_name, 1, 10)
    before = env.state_digest()
    name = env.next_action().name
    outcomes = [env.call(name, None), env.call(name, {"a": 1})]  # type: ignore[arg-type]
    assert [(o.valid, o.error_kind) for o in outcomes] == [(False, MALFORMED)] * 2
    assert all(o.result_text == "error: arguments are not valid JSON (not text)." for o in outcomes)
    assert env.state_digest() == before


def test_tickets_transitions_and_rules() -> None:
    env = make_env("tickets", 0, 10)
    assert env.call("close", json.dumps({"ticket_id": "T-1", "resolution": "solved"})).error_kind == REJECTED
    out = env.call("fetch_next", "{}")
    assert out.valid and out.result_text.startswith("ticket T-")
    t = env.tickets[0]
    assert env.call("assign", json.dumps({"ticket_id": t.id, "team": "nobody"})).error_kind == SCHEMA
    # closing before assigning is allowed but leaves the task failed for good
    env.call("close", json.dumps({"ticket_id": t.id, "resolution": "solved"}))
    assert env.call("tag", json.dumps({"ticket_id": t.id, "tag": "urgent"})).error_kind == REJECTED
    env.solve()
    assert not env.check()


def test_ledger_rejects_wrong_amount_and_requires_reconcile() -> None:
    env = make_env("ledger", 2, 10)
    env.call("next_entry", "{}")
    act = env.next_action()
    wrong = dict(act.arguments, amount=act.arguments["amount"] + 5)
    assert env.call(act.name, json.dumps(wrong)).error_kind == REJECTED
    assert env.call("reconcile", "{}").error_kind == REJECTED
    while (a := env.next_action()) is not None and a.name != "reconcile":
        env.run_action(a)
    assert not env.check()  # all posted, not reconciled yet
    assert env.call("reconcile", "{}").result_text.startswith("reconciled")
    assert env.check()


def test_files_move_needs_folder_and_tells_next_file() -> None:
    env = make_env("files", 4, 25)
    first = env._inbox()[0]
    assert first in env.goal()
    assert env.call("move_file", json.dumps({"src": first, "dst": "/nowhere/x"})).error_kind == REJECTED
    env.call("read_file", json.dumps({"path": first}))
    act = env.next_action()
    if act.name == "make_dir":
        env.run_action(act)
        act = env.next_action()
    moved = env.run_action(act)
    assert moved.valid and moved.error_kind is None
    assert f"next: {env._inbox()[0]}" in moved.result_text


def test_notes_check_needs_collected_words_in_order() -> None:
    env = make_env("notes", 5, 25)
    assert env.words, "seed 5 at horizon 25 has collect notes"
    # put the right answer without collecting: not a success
    env.call("put", json.dumps({"key": "answer", "value": env.code}))
    assert not env.check()
    env.solve()
    assert env.check()
    assert env.store["collected"] == ",".join(env.words)


def test_builtin_suites_and_hash() -> None:
    smoke, long_ = builtin_suite("agent-smoke"), builtin_suite("agent-long")
    assert {s.horizon for s in smoke} == {10}
    assert {s.horizon for s in long_} == set(HORIZONS)
    assert {s.env for s in long_} == set(ENVIRONMENTS)
    assert all(s.step_budget > s.horizon for s in long_)
    assert content_hash(smoke) == content_hash(builtin_suite("agent-smoke"))
    assert content_hash(smoke) != content_hash(smoke[:-1])


def test_long_horizon_oracles_are_exact() -> None:
    for name in ENV_NAMES:
        for horizon in (200, 500):
            env = make_env(name, 0, horizon)
            assert env.solve() == horizon and env.check()


def test_scenario_file_errors_name_file_and_line(tmp_path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text('{"env": "tickets", "horizon": 10}\n{"env": "tickets"}\n')
    with pytest.raises(ValueError, match=r"s.jsonl:2: missing field 'horizon'"):
        load_scenario_file(p)
    p.write_text('{"env": "mars", "horizon": 10}\n')
    with pytest.raises(ValueError, match=r"s.jsonl:1: unknown agent environment 'mars'"):
        load_scenario_file(p)
    p.write_text('{"env": "notes", "horizon": 12, "seed": 3}\n')
    (s,) = load_scenario_file(p)
    assert s == scenario("notes", 12, 3)
