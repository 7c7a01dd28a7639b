"""Where the chat template renders the offered tools (``training.train --tool-list-at``): the shipped ``system``
template is untouched, ``first-user`` puts them after the first request, and a checkpoint ships the template it
was trained with, which the engine and ``transformers`` then render alike."""

from __future__ import annotations

import json

import pytest
from safetensors import safe_open

from reference_engine.chat_template import render_chat
from tests.model.fixtures import TOY_ARCH_ARGS
from training.chat_format import CHAT_TEMPLATE, FIRST_USER_CHAT_TEMPLATE, TOOL_LIST_PLACES, chat_template, render
from training.corpus import agent_conversations, toolcall_conversations
from training.train import main as train_main

TOOLS = [{"type": "function", "function": {"name": "get_forecast", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["location", "days"]}}}]
SIGNATURE = "get_forecast(location:string, days:integer)\n"


def test_each_place_names_its_template_and_an_unknown_place_is_refused() -> None:
    assert TOOL_LIST_PLACES == ("system", "first-user")
    assert chat_template() is chat_template("system") is CHAT_TEMPLATE
    assert chat_template("first-user") is FIRST_USER_CHAT_TEMPLATE
    with pytest.raises(ValueError, match="'last-user'"):
        chat_template("last-user")


def test_first_user_renders_the_tools_after_the_request_in_its_turn() -> None:
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Forecast for Lima, 3 days"}]
    text = render(msgs, TOOLS, add_generation_prompt=True, template=FIRST_USER_CHAT_TEMPLATE)
    assert text == ("<|im_start|>system\nBe brief.\n<|im_end|>\n"
                    "<|im_start|>user\nForecast for Lima, 3 days\nTools:\n" + SIGNATURE + "<|im_end|>\n"
                    "<|im_start|>assistant\n")
    # the shipped template still puts them in the system turn, before the request
    assert render(msgs, TOOLS, add_generation_prompt=True) == (
        "<|im_start|>system\nBe brief.\nTools:\n" + SIGNATURE + "<|im_end|>\n"
        "<|im_start|>user\nForecast for Lima, 3 days<|im_end|>\n<|im_start|>assistant\n")


def test_first_user_without_tools_or_without_a_request_falls_back_cleanly() -> None:
    chat = [{"role": "user", "content": "hi"}]
    assert render(chat, None, template=FIRST_USER_CHAT_TEMPLATE) == render(chat, None)
    # no user message to follow: the tools stay in the system turn, so they are never dropped
    system_only = [{"role": "system", "content": "S"}]
    assert render(system_only, TOOLS, template=FIRST_USER_CHAT_TEMPLATE) == render(system_only, TOOLS)
    assert render([], TOOLS, template=FIRST_USER_CHAT_TEMPLATE) == "<|im_start|>system\nTools:\n" + SIGNATURE + \
        "<|im_end|>\n"


def test_first_user_keeps_the_tools_at_the_first_request_as_an_agent_run_grows() -> None:
    """The rendered prefix of a conversation never changes when turns are added: prompt caching and the
    shared-prefix training groups rely on it."""
    conv = next(c for c in agent_conversations(4, seed=3) if len(c.messages) > 6)
    rendered = [render(conv.messages[:k], conv.tools, template=FIRST_USER_CHAT_TEMPLATE)
                for k in range(2, len(conv.messages) + 1)]
    assert all(longer.startswith(shorter) for shorter, longer in zip(rendered, rendered[1:]))
    full = rendered[-1]
    assert full.count("Tools:\n") == 1
    goal = next(m["content"] for m in conv.messages if m["role"] == "user")
    assert full.index(goal) < full.index("Tools:\n") < full.index("<|im_start|>assistant")


@pytest.mark.parametrize("template", [CHAT_TEMPLATE, FIRST_USER_CHAT_TEMPLATE], ids=TOOL_LIST_PLACES)
def test_training_and_engine_render_the_corpus_alike(template: str) -> None:
    convs = list(toolcall_conversations(30, seed=8)) + list(agent_conversations(3, seed=9))
    for c in convs:
        assert c.text(template) == render_chat(template, c.messages, tools=c.tools, add_generation_prompt=False)


@pytest.mark.slow
def test_a_first_user_run_ships_its_template_and_records_the_place(tmp_path, capsys) -> None:
    from transformers import AutoTokenizer

    out = tmp_path / "ckpt"
    train_main(["--n-toolcall", "40", "--n-agent", "4", "--seed", "11", "--steps", "3", "--time-limit-min", "5",
                "--threads", "1", "--tool-list-at", "first-user", "--out", str(out), *TOY_ARCH_ARGS])
    cfg = json.loads((out / "tokenizer_config.json").read_text())
    assert cfg["chat_template"] == FIRST_USER_CHAT_TEMPLATE
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert f.metadata()["tool_list_at"] == "first-user"
    msgs = [{"role": "user", "content": "Forecast for Lima, 3 days"}]
    hf = AutoTokenizer.from_pretrained(str(out)).apply_chat_template(msgs, tools=TOOLS, add_generation_prompt=True,
                                                                     tokenize=False)
    assert hf == render(msgs, TOOLS, add_generation_prompt=True, template=FIRST_USER_CHAT_TEMPLATE)
    assert hf.index("Forecast for Lima") < hf.index("Tools:")
