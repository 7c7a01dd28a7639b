"""Constrained decoding with the shipped model: forced tool calls (named, "required"), tool_choice "none" and
response_format json_object, streamed and not, and the JSON automaton and token healing underneath."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from reference_engine.constraints import DONE, ROOT_OBJECT, arguments_state, feed
from reference_engine.launch import default_model_path, start_server
from reference_engine.tokenizer import Tokenizer
from reference_engine.wire import _call_header
from suites.toolcall.catalog import TOOLS_BY_NAME

SUITE = default_model_path().parents[2] / "suites" / "toolcall" / "data"


def _cases(name: str, n: int, *, want_call: bool | None = None) -> list[dict]:
    out = []
    for line in (SUITE / name).read_text().splitlines():
        body = json.loads(line)
        meta = body.pop("_meta")
        if want_call is not None and (meta.get("expected") is not None) != want_call:
            continue
        out.append(body)
        if len(out) == n:
            break
    return out


@pytest.fixture(scope="module")
def shipped():
    with start_server(threads=1) as srv:
        yield srv


def _client(srv) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)


def _stream_message(srv, **kw):
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state = ChatCompletionStreamState()
    for ch in _client(srv).chat.completions.create(stream=True, **kw):
        state.handle_chunk(ch)
    return state.current_completion_snapshot.choices[0]


# ---- the automaton
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text",
                         ['{}', '{"a": 1}', '{ "a" :\n 1 }', '{"a": [1, -2.5e+3, 0, true, false, null, "x\\u00e9\\n"],'
                                  ' "b": {"c": []}, "d": "caf\u00e9"}'])
def test_automaton_accepts_json_objects(text):
    state = feed(ROOT_OBJECT, text.encode())
    assert state is not None and state[1] == DONE
    json.loads(text)


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


@pytest.mark.parametrize("text", ['[]', '"x"', '{"a" 1}', '{"a": 01}', '{"a": tru}', '{"a": "x\ny"}', '{"a": 1,}',
                                  '{}}', '{"a": [1 2]}', '{"a": -}', "{'a': 1}", '{"a": 1.}', '{"a": "\\x"}'])
def test_automaton_refuses_what_json_refuses(text):
    state = feed(ROOT_OBJECT, text.encode())
    assert state is None or state[1] != DONE
    assert not _json_object(text)


def test_output_starts_at_its_brace():
    """Leading whitespace is valid JSON but refused at the root: the shipped model, constrained, wrote runs of
    newlines before the object until max_tokens."""
    assert feed(ROOT_OBJECT, b" {}") is None and _json_object(" {}")


def test_arguments_must_be_an_object_then_the_call_closes():
    state = arguments_state(_call_header("get_weather"))
    assert feed(state, b' "Paris"') is None and feed(state, b" [1]") is None
    done = feed(state, b' {"city": "Paris"}}')          # the arguments, then the call object's own brace
    assert done is not None and done[1] == DONE
    assert feed(state, b' {"city": "Paris"}') is not None and feed(state, b' {"city": "Paris"}}}') is None


# ---- token healing
# ----------------------------------------------------------------------------------------------------
def test_forced_header_ends_on_a_token_boundary_of_the_training_text():
    """The named call's header is forced in the prompt. It must end where the training text has a token boundary,
    so the model's next token is the one it learnt (`` {"`` merges the space with the brace): the header stops
    before that space. Forcing the space too would leave the model after a lone space token it never saw there."""
    tok = Tokenizer(default_model_path())
    prompt = "<|im_start|>assistant\n<tool_call>"
    for name in list(TOOLS_BY_NAME)[:12]:
        header = prompt + _call_header(name)
        full = tok.encode(header + ' {"city": "Oslo", "days": 3}}</tool_call>')
        forced = tok.encode(header)
        assert full[:len(forced)] == forced, name
        spaced = tok.encode(header + " ")
        assert full[:len(spaced)] != spaced, name          # what a header ending in a space would do


# ---- forced calls with the shipped model
# ------------------------------------------------------------------------------
def _check_call(msg, finish: str, tools: list[dict], name: str | None) -> None:
    assert finish == "tool_calls", (finish, msg.content)
    assert not msg.content and len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert call.function.name in {t["function"]["name"] for t in tools}
    if name is not None:
        assert call.function.name == name
    assert isinstance(json.loads(call.function.arguments), dict)


@pytest.mark.slow
def test_named_and_required_calls_at_temperature_0_streamed_and_not(shipped):
    cases = _cases("toolcall-schemas.jsonl", 4) + _cases("toolcall-core.jsonl", 4, want_call=False)
    for body in cases:
        names = [t["function"]["name"] for t in body["tools"]]
        for choice in ({"type": "function", "function": {"name": names[-1]}}, "required"):
            kw = dict(model=shipped.model, messages=body["messages"], tools=body["tools"], tool_choice=choice,
                      temperature=0, max_tokens=256)
            r = _client(shipped).chat.completions.create(**kw)
            want = names[-1] if isinstance(choice, dict) else None
            _check_call(r.choices[0].message, r.choices[0].finish_reason, body["tools"], want)
            s = _stream_message(shipped, **kw)
            _check_call(s.message, s.finish_reason, body["tools"], want)
            assert s.message.tool_calls[0].function.name == r.choices[0].message.tool_calls[0].function.name
            assert s.message.tool_calls[0].function.arguments == r.choices[0].message.tool_calls[0].function.arguments


@pytest.mark.slow
def test_forced_calls_stay_calls_when_sampling_hot(shipped):
    """At temperature 1.3 the unconstrained model often breaks its own markup (measured before the constraint:
    about half the forced replies at temperature 2 had no parseable call). Constrained, every reply that was not
    cut by max_tokens is one call of an offered tool with JSON-object arguments; a cut one is still a call
    (finish_reason "length"), never markup in content."""
    finished = 0
    for body in _cases("toolcall-schemas.jsonl", 6):
        for seed in range(3):
            for choice in (body["tool_choice"], "required"):
                r = _client(shipped).chat.completions.create(
                    model=shipped.model, messages=body["messages"], tools=body["tools"], tool_choice=choice,
                    temperature=1.3, seed=seed, max_tokens=160)
                ch = r.choices[0]
                assert ch.message.tool_calls and "<tool_call>" not in (ch.message.content or "")
                if ch.finish_reason == "length":
                    continue
                finished += 1
                _check_call(ch.message, ch.finish_reason, body["tools"],
                            choice["function"]["name"] if isinstance(choice, dict) else None)
    assert finished >= 18                                   # of 36: the check above is not vacuous


@pytest.mark.slow
def test_tool_choice_none_never_calls(shipped):
    """Cases where the model calls a tool under "auto": with "none" the call tag is banned, so no call and no
    markup, greedy and sampled."""
    bodies = _cases("toolcall-core.jsonl", 5, want_call=True)
    auto_calls = 0
    for body in bodies:
        r = _client(shipped).chat.completions.create(model=shipped.model, messages=body["messages"],
                                                     tools=body["tools"], temperature=0, max_tokens=96)
        auto_calls += bool(r.choices[0].message.tool_calls)
        for temperature, seed in ((0, None), (1.3, 1), (1.3, 2)):
            for stream in (False, True):
                kw = dict(model=shipped.model, messages=body["messages"], tools=body["tools"], tool_choice="none",
                          temperature=temperature, seed=seed, max_tokens=96)
                ch = _stream_message(shipped,
                                     **kw) if stream else _client(shipped).chat.completions.create(**kw).choices[0]
                assert not ch.message.tool_calls and "<tool_call>" not in (ch.message.content or "")
                assert ch.finish_reason in ("stop", "length")
    assert auto_calls >= 4                                  # these are cases the model does answer with a call


def test_response_format_json_object(shipped):
    c = _client(shipped)
    finished = 0
    for body in _cases("toolcall-core.jsonl", 4):
        for temperature, seed in ((0, None), (1.0, 3)):
            r = c.chat.completions.create(model=shipped.model, messages=body["messages"], temperature=temperature,
                                          seed=seed, max_tokens=120, response_format={"type": "json_object"})
            ch = r.choices[0]
            assert ch.message.content.startswith("{") and not ch.message.tool_calls
            if ch.finish_reason == "length":
                continue
            finished += 1
            assert ch.finish_reason == "stop" and isinstance(json.loads(ch.message.content), dict), ch.message.content
    assert finished >= 2                                    # of 8: the check above is not vacuous
    base = {"model": shipped.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    for fmt, param in (({"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}, "response_format.type"),
                       ({"type": "yaml"}, "response_format")):
        r = httpx.post(shipped.base_url + "/chat/completions", json={**base, "response_format": fmt})
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
        assert "response_format" in r.json()["error"]["message"]
