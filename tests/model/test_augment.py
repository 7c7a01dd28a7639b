"""Training-only diversity: generated small talk stays disjoint from evaluation text; rewording keeps values."""

from __future__ import annotations

import json
import random

import pytest

from suites.toolcall.catalog import EVAL_PHRASINGS, generate_cases
from training.augment import perturb_request, small_talk
from training.corpus import toolcall_conversations
from training.phrasings import TRAIN_PHRASINGS


def test_generated_small_talk_is_varied_and_never_an_evaluation_request() -> None:
    rng = random.Random(0)
    made = {small_talk(rng) for _ in range(3000)}
    assert len(made) > 600  # a pool, not a handful to memorise
    evaluation = {w.format(t=q).lower() for q in EVAL_PHRASINGS.no_tool_requests for w in EVAL_PHRASINGS.wrappers}
    assert not {m.lower() for m in made} & evaluation


def test_wide_small_talk_adds_kinds_but_no_near_copy_of_an_evaluation_request() -> None:
    from tests.model.test_catalog_train_phrasings import near_duplicate

    basic_rng, wide_rng = random.Random(0), random.Random(0)
    basic = {small_talk(basic_rng) for _ in range(3000)}
    wide = {small_talk(wide_rng, wide=True) for _ in range(3000)}
    assert len(wide - basic) > 500  # new kinds, not the basic pool again
    close = [(made, ask) for made in wide for ask in EVAL_PHRASINGS.no_tool_requests if near_duplicate(made, ask)]
    assert not close


def test_wide_small_talk_is_opt_in_and_keeps_every_case_kind() -> None:
    from training.augment import _ASK_THINGS, _INVENTIONS, _SOCIAL_TASKS

    plain = list(toolcall_conversations(300, 9))
    assert [c.text() for c in plain] == [c.text() for c in toolcall_conversations(300, 9, wide_small_talk=False)]
    wide = list(toolcall_conversations(300, 9, wide_small_talk=True))
    # the same cases in the same order (the shared random stream moves, so values and names may differ)
    assert [bool(c.messages[-1].get("tool_calls")) for c in wide] == \
        [bool(c.messages[-1].get("tool_calls")) for c in plain]
    new_words = _ASK_THINGS + _INVENTIONS + _SOCIAL_TASKS
    asks = [c.messages[-2]["content"] for c in wide]
    assert any(w in a for a in asks for w in new_words)
    assert not any(w in c.messages[-2]["content"] for c in plain for w in new_words)


def test_rewording_keeps_every_argument_value_in_the_request() -> None:
    rng = random.Random(1)
    changed = 0
    for body, meta in generate_cases(3, 400, TRAIN_PHRASINGS, no_tool_share=0.0):
        text = body["messages"][-1]["content"]
        args = meta["expected"]["arguments"]
        new = perturb_request(text, args, rng)
        changed += new != text
        for value in _strings(args):
            if value in text:  # values the phrasing states verbatim must survive verbatim
                assert value in new, (value, text, new)
    assert changed > 200


def test_training_conversations_use_the_diversified_pool_but_keep_answers() -> None:
    convs = list(toolcall_conversations(300, 5))
    asks = [c.messages[-2]["content"] for c in convs]
    catalogue_small_talk = {w.format(t=q) for q in TRAIN_PHRASINGS.no_tool_requests for w in TRAIN_PHRASINGS.wrappers}
    no_tool = [c for c in convs if not c.messages[-1].get("tool_calls")]
    assert len(no_tool) / len(convs) > 0.3
    assert any(a not in catalogue_small_talk for a, c in zip(asks, convs) if c in no_tool)
    for c in convs:
        calls = c.messages[-1].get("tool_calls")
        if calls:
            json.loads(calls[0]["function"]["arguments"])  # the supervised answer is unchanged JSON


def _strings(v):
    if isinstance(v, dict):
        return [s for x in v.values() for s in _strings(x)]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return [v] if isinstance(v, str) else []


def test_scrambled_values_are_fresh_consistent_and_schema_valid() -> None:
    from training.augment import scramble_values
    from verifier.kinds.toolcall.checks import check_call

    rng = random.Random(4)
    done = 0
    for body, meta in generate_cases(8, 300, TRAIN_PHRASINGS, no_tool_share=0.0):
        text = body["messages"][-1]["content"]
        exp = meta["expected"]
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}
        out = scramble_values(text, exp["arguments"], schemas[exp["tool"]], rng)
        if out is None:
            continue
        done += 1
        new_text, new_args = out
        assert new_text != text and new_args != exp["arguments"]
        assert check_call(exp["tool"], json.dumps(new_args), schemas).valid
        for old, new in zip(_strings(exp["arguments"]), _strings(new_args)):
            if old in text:  # a stated value is stated in its new form, and the old one is gone
                assert new in new_text and (old == new or old not in new_text), (old, new, new_text)
    assert done > 150


@pytest.mark.parametrize("style", ["variants", "arbitrary"])
def test_renamed_tools_stay_consistent_between_list_history_and_answer(style: str) -> None:
    from training.augment import rename_tools

    rng = random.Random(2)
    renamed = 0
    for body, meta in generate_cases(9, 200, TRAIN_PHRASINGS, followup_share=0.5):
        new_body, new_exp = rename_tools(body, meta["expected"], rng, style)
        offered = [t["function"]["name"] for t in new_body["tools"]]
        old = [t["function"]["name"] for t in body["tools"]]
        assert len(set(offered)) == len(offered) and len(offered) == len(old)
        renamed += offered != old
        if new_exp is not None:
            assert new_exp["tool"] in offered and new_exp["arguments"] == meta["expected"]["arguments"]
        for m in new_body["messages"]:
            for c in m.get("tool_calls") or []:
                earlier = c["function"]["name"]
                assert earlier in offered or earlier not in old  # an earlier call of an offered tool is renamed too
    assert renamed > 150


def test_arbitrary_names_say_nothing_about_the_tool() -> None:
    """With ``arbitrary`` renaming no name word comes from the old name, and one tool gets so many different
    names that none can be learnt as its alias (``variants`` gives each tool a handful)."""
    from training.augment import tool_renaming

    names: dict[str, dict[str, set[str]]] = {"variants": {}, "arbitrary": {}}
    for style, per_tool in names.items():
        rng = random.Random(5)
        for body, _ in generate_cases(9, 300, TRAIN_PHRASINGS):
            for old, new in tool_renaming(body, rng, style).items():
                per_tool.setdefault(old, set()).add(new)
                if style == "arbitrary":
                    assert not set(new.split("_")) & set(old.split("_")), (old, new)
    tools = sorted(set(names["variants"]) & set(names["arbitrary"]))
    assert len(tools) > 20
    aliases = {style: sum(len(names[style][t]) for t in tools) / len(tools) for style in names}
    assert aliases["variants"] < 8 and aliases["arbitrary"] > 2 * aliases["variants"], aliases
    with pytest.raises(ValueError, match="rename style"):
        tool_renaming({"tools": []}, random.Random(0), "aliases")


def test_withheld_tool_leaves_no_offered_tool_of_its_group() -> None:
    from suites.toolcall.catalog import TOOLS_BY_NAME, _group, withhold_tool

    made = 0
    for body, meta in generate_cases(11, 200, TRAIN_PHRASINGS):
        if meta["expected"] is None:
            continue
        twin = withhold_tool(body, meta["expected"]["tool"], random.Random(3))
        if twin is None:  # the history called a tool of the withheld group
            continue
        made += 1
        group = _group(TOOLS_BY_NAME[meta["expected"]["tool"]])
        names = [t["function"]["name"] for t in twin["tools"]]
        assert all(_group(TOOLS_BY_NAME[n]) != group for n in names)
        assert len(names) == len(set(names)) == len(body["tools"])
        assert twin["messages"] == body["messages"]
    assert made > 100


def test_contrast_twins_repeat_a_tool_request_with_a_refusal_and_leave_the_default_corpus_alone() -> None:
    plain = list(toolcall_conversations(120, 8))
    assert [c.text() for c in plain] == [c.text() for c in toolcall_conversations(120, 8, 0.0)]
    paired = list(toolcall_conversations(120, 8, 0.5))
    twins = [i for i, c in enumerate(paired) if c.source == "toolcall-contrast"]
    assert 15 < len(twins) < 60
    assert len(paired) == 120 + len(twins)
    for i in twins:
        twin, original = paired[i], paired[i + 1]
        assert twin.messages[-2]["content"] == original.messages[-2]["content"]  # the same request
        assert twin.messages[-1]["content"] and not twin.messages[-1].get("tool_calls")  # answered in text
        assert original.messages[-1]["tool_calls"]  # the original calls the tool
        offered = {t["function"]["name"] for t in twin.tools}
        assert original.messages[-1]["tool_calls"][0]["function"]["name"] not in offered
