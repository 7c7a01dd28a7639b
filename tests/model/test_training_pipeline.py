"""The training pipeline's parts, on real (small) data: template, loss mask, batching, HF name parity."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from training.batching import SCHEMA_KEY, SCHEMA_NAME, Batch, bucket_batches, encode, encode_all
from training.chat_format import CHAT_TEMPLATE, assistant_spans, call_name_and_key_spans, render, tool_call_text
from training.corpus import agent_conversations, toolcall_conversations
from training.model import TinyConfig, TinyLlama
from training.tokenizer_train import train_tokenizer
from training.train import main as train_main
from training.train import masked_loss


@pytest.fixture(scope="module")
def convs():
    return list(toolcall_conversations(60, seed=5)) + list(agent_conversations(6, seed=6))


@pytest.fixture(scope="module")
def tok(convs):
    return train_tokenizer([c.text() for c in convs], vocab_size=600)


def test_corpus_uses_catalogue_train_templates_and_agent_oracles(convs):
    sources = {c.source.split(":")[0] for c in convs}
    assert sources == {"toolcall-catalog", "agent"}
    # every conversation ends with a supervised assistant turn
    assert all(c.messages[-1]["role"] == "assistant" for c in convs)


def test_training_render_matches_engine_render(convs):
    from reference_engine.chat_template import render_chat

    for c in convs:
        assert render(c.messages, c.tools) == render_chat(CHAT_TEMPLATE, c.messages, tools=c.tools,
                                                          add_generation_prompt=False)


def test_assistant_spans_cover_tool_call_and_end_of_turn():
    msgs = [{"role": "user", "content": "weather in Oslo"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "w", "arguments": json.dumps({"city": "Oslo"})}}]}]
    text = render(msgs, [{"type": "function", "function": {"name": "w", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
    (a, b), = assistant_spans(text)
    assert text[a:b] == tool_call_text("w", {"city": "Oslo"}) + "<|im_end|>"
    assert "w(city:string)" in text


def test_loss_mask_marks_exactly_assistant_tokens(convs, tok):
    texts = [c.text() for c in convs[:12] + convs[-6:]]  # single-turn calls and multi-turn agent runs
    docs = encode_all(tok, texts)
    assert [d.ids.tolist() for d in docs[:3]] == [encode(tok, t).ids.tolist() for t in texts[:3]]
    for text, doc in zip(texts, docs):
        supervised = tok.decode(doc.ids[doc.mask].tolist(), skip_special_tokens=False)
        expected = "".join(text[a:b] for a, b in assistant_spans(text))
        assert supervised == expected


def test_bucketed_batches_hold_every_document_once_one_per_row(convs, tok):
    docs = [encode(tok, c.text()) for c in convs[:40]]
    batches = bucket_batches(docs, 1536, pad_id=0, seed=0)
    assert batches and all(b.ids.numel() <= 1536 or b.ids.shape[0] == 1 for b in batches)
    assert all(b.segments is None and b.positions is None for b in batches)  # plain rows: the maskless kernel
    assert sum(b.ids.shape[0] for b in batches) == len(docs)
    assert sum(int(b.targets.sum()) for b in batches) == sum(int(d.mask.sum()) for d in docs)
    rows = sorted(tuple(b.ids[r][b.ids[r] != 0].tolist()) for b in batches for r in range(b.ids.shape[0]))
    assert rows == sorted(tuple(d.ids[d.ids != 0].tolist()) for d in docs)  # each row is one whole document
    for b in batches:
        assert b.ids.shape[1] % 8 == 0 and not b.targets[b.ids == 0].any()  # padding is never a target


def test_right_padding_does_not_change_the_document_logits():
    torch.manual_seed(0)
    m = TinyLlama(TinyConfig(vocab_size=128, hidden_size=128, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2))
    a = torch.randint(1, 128, (1, 7))
    padded = torch.cat([a, torch.zeros(1, 9, dtype=torch.long)], 1)
    with torch.no_grad():
        torch.testing.assert_close(m(padded)[:, :7], m(a), rtol=1e-4, atol=1e-5)


def test_state_dict_loads_into_transformers_llama_with_equal_logits():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = TinyConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2)
    mine = TinyLlama(cfg)
    hf_cfg = {k: v for k, v in cfg.to_hf(eos_token_id=2, pad_token_id=0, bos_token_id=None).items()
              if k not in ("architectures", "model_type", "torch_dtype")}
    hf = LlamaForCausalLM(LlamaConfig(**hf_cfg))
    hf.load_state_dict(mine.state_dict(), strict=True)
    x = torch.randint(0, 256, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(mine(x), hf(x).logits, rtol=1e-4, atol=1e-4)


def _one_layer_model() -> TinyLlama:
    torch.manual_seed(0)
    return TinyLlama(TinyConfig(vocab_size=64, hidden_size=128, intermediate_size=128, num_hidden_layers=1,
                                num_attention_heads=4, num_key_value_heads=2))


def test_masked_loss_ignores_prompt_tokens():
    m = _one_layer_model()
    ids = torch.randint(0, 64, (1, 10))
    tmask = torch.zeros(1, 10, dtype=torch.bool)
    tmask[0, 6:] = True
    loss = masked_loss(m, Batch(ids, tmask))
    loss.backward()
    assert np.isfinite(loss.item())
    with torch.no_grad():
        logits = m(ids)
    ref = torch.nn.functional.cross_entropy(logits[0, 5:9], ids[0, 6:10])
    torch.testing.assert_close(loss.detach(), ref, rtol=1e-5, atol=1e-5)


def test_decision_weight_weighs_the_first_token_of_each_answer():
    """The first target of each assistant turn (call or text?) counts ``decision_weight`` times."""
    m = _one_layer_model()
    ids = torch.randint(0, 64, (1, 12))
    tmask = torch.zeros(1, 12, dtype=torch.bool)
    tmask[0, 3:6] = True   # one answer: targets 3, 4, 5 (3 decides)
    tmask[0, 8:11] = True  # a second: 8 decides
    batch = Batch(ids, tmask)
    with torch.no_grad():
        logits = m(ids)[0]
        per_token = torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:], reduction="none")
        weighted = masked_loss(m, batch, decision_weight=5.0)
        assert torch.allclose(masked_loss(m, batch, decision_weight=1.0), masked_loss(m, batch))
    targets = [3, 4, 5, 8, 9, 10]
    weights = torch.tensor([5.0, 1, 1, 5, 1, 1])
    expected = (per_token[[t - 1 for t in targets]] * weights).sum() / weights.sum()
    torch.testing.assert_close(weighted, expected, rtol=1e-5, atol=1e-6)


def test_text_decision_weight_weighs_only_answers_that_start_in_text():
    """With ``text_decision_weight`` an answer whose first token is not ``<tool_call>`` gets that weight instead."""
    m = _one_layer_model()
    call = 7
    ids = torch.randint(10, 64, (1, 12))
    ids[0, 3] = call       # the first answer is a tool call
    tmask = torch.zeros(1, 12, dtype=torch.bool)
    tmask[0, 3:6] = True
    tmask[0, 8:11] = True  # the second starts in text (ids >= 10)
    batch = Batch(ids, tmask)
    with torch.no_grad():
        per_token = torch.nn.functional.cross_entropy(m(ids)[0][:-1], ids[0, 1:], reduction="none")
        weighted = masked_loss(m, batch, decision_weight=5.0, text_decision_weight=10.0, call_token_id=call)
        same = masked_loss(m, batch, decision_weight=5.0, text_decision_weight=5.0, call_token_id=call)
        torch.testing.assert_close(same, masked_loss(m, batch, decision_weight=5.0))
    weights = torch.tensor([5.0, 1, 1, 10, 1, 1])
    expected = (per_token[[t - 1 for t in [3, 4, 5, 8, 9, 10]]] * weights).sum() / weights.sum()
    torch.testing.assert_close(weighted, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="call_token_id"):
        masked_loss(m, batch, decision_weight=5.0, text_decision_weight=10.0)


def test_call_name_and_key_spans_are_the_name_and_every_argument_key_only():
    """Keys nested in objects count; values never do, even one that holds quotes and a colon."""
    text = "x" + tool_call_text("get_weather", {"city": 'a: "b"', "opts": {"unit": "c", "n": [1, 2]},
                                               "x y": None, "note": "k:"}) + "<|im_end|>"
    names, keys = call_name_and_key_spans(text)
    assert [text[a:b] for a, b in names + keys] == [
        '"get_weather"', '"city"', '"opts"', '"unit"', '"n"', '"x y"', '"note"']
    assert [text[a:b] for a, b in names] == ['"get_weather"']
    assert call_name_and_key_spans("<|im_start|>assistant\nNo tool fits that.<|im_end|>") == ([], [])


def test_schema_mask_marks_supervised_name_and_key_tokens(convs, tok):
    """``Doc.schema`` is the targets inside ``call_name_and_key_spans``: names and keys of the answer's call, never
    the prompt's tool list (which holds the same words) and never argument values."""
    for conv in convs[:20]:
        text = conv.text()
        doc = encode_all(tok, [text])[0]
        assert not ((doc.schema > 0) & ~doc.mask).any()
        marked = tok.decode(doc.ids[doc.schema > 0].tolist(), skip_special_tokens=False).replace('"', "")
        names = tok.decode(doc.ids[doc.schema == SCHEMA_NAME].tolist(), skip_special_tokens=False)
        last = conv.messages[-1]
        if last.get("tool_calls"):
            fn = last["tool_calls"][0]["function"]
            assert fn["name"] in marked and fn["name"] in names
            for key in json.loads(fn["arguments"]):
                assert key in marked
            for value in json.loads(fn["arguments"]).values():
                if isinstance(value, str) and len(value) > 3 and value not in fn["name"]:
                    assert value not in marked
        else:
            assert not doc.schema.any()
    assert sum(int((d.schema == SCHEMA_KEY).sum()) for d in encode_all(tok, [c.text() for c in convs[:20]])) > 0


def test_schema_weight_weighs_name_and_key_targets():
    """Names and keys get ``schema_weight``; with ``schema_names_only`` the names alone."""
    m = _one_layer_model()
    ids = torch.randint(0, 64, (1, 12))
    tmask = torch.zeros(1, 12, dtype=torch.bool)
    tmask[0, 3:9] = True
    schema = torch.zeros(1, 12, dtype=torch.uint8)
    schema[0, 4:6] = SCHEMA_NAME  # targets 4 and 5 are a name's tokens
    schema[0, 7] = SCHEMA_KEY     # target 7 is a key's
    batch = Batch(ids, tmask, schema=schema)
    with torch.no_grad():
        per_token = torch.nn.functional.cross_entropy(m(ids)[0][:-1], ids[0, 1:], reduction="none")
        both = masked_loss(m, batch, decision_weight=5.0, schema_weight=3.0)
        names = masked_loss(m, batch, decision_weight=5.0, schema_weight=3.0, schema_names_only=True)
        torch.testing.assert_close(masked_loss(m, batch, decision_weight=5.0, schema_weight=1.0),
                                   masked_loss(m, Batch(ids, tmask), decision_weight=5.0))
    picked = per_token[[t - 1 for t in range(3, 9)]]
    for loss, weights in ((both, torch.tensor([5.0, 3, 3, 1, 3, 1])), (names, torch.tensor([5.0, 3, 3, 1, 1, 1]))):
        torch.testing.assert_close(loss, (picked * weights).sum() / weights.sum(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="schema mask"):
        masked_loss(m, Batch(ids, tmask), schema_weight=3.0)


def test_batches_carry_the_schema_mask(convs, tok):
    docs = encode_all(tok, [c.text() for c in convs])
    batches = bucket_batches(docs, 2048, pad_id=0, seed=0)
    assert sum(int(b.schema.sum()) for b in batches) == sum(int(d.schema.sum()) for d in docs) > 0
    assert all(not ((b.schema > 0) & ~b.targets).any() for b in batches)


@pytest.mark.parametrize("argv, message", [
    (["--contrast-share", "1.5"], "--contrast-share must be between 0 and 1"),
    (["--contrast-share", "0.3", "--group-size", "4"], "cannot be combined with --group-size"),
    (["--contrast-share", "0", "--wide-small-talk", "--group-size", "4"], "cannot be combined with --group-size"),
    (["--ema-decay", "1.0"], "--ema-decay must be in [0, 1)"),
    (["--ema-decay", "0", "--raw-out", "raw"], "it needs --ema-decay above 0"),
])
def test_bad_options_stop_with_one_line(argv, message, capsys) -> None:
    from training.train import main

    with pytest.raises(SystemExit):
        main(argv + ["--out", "unused"])
    assert message in capsys.readouterr().err


def test_agent_horizons_draw_longer_tasks_cut_to_the_same_window(capsys) -> None:
    """``--agent-horizons 25,50`` draws long tasks, whose tool results carry more state (a notes list of up to 10
    words), yet every trajectory keeps at most its latest 14 calls, so documents stay as short as before."""
    from training.corpus import agent_conversations
    from training.train import build_parser, recipe_metadata

    args = build_parser().parse_args(["--agent-horizons", "25,50"])
    assert args.agent_horizons == (25, 50) and recipe_metadata(args)["agent_horizons"] == "25,50"
    assert recipe_metadata(build_parser().parse_args([]))["agent_horizons"] == "4,6,8,10,12,14"
    convs = list(agent_conversations(16, seed=3, horizons=(25, 50)))
    assert {c.meta["horizon"] for c in convs} <= {25, 50} and len({c.meta["horizon"] for c in convs}) == 2
    for c in convs:
        calls = [m for m in c.messages if m["role"] == "assistant" and m.get("tool_calls")]
        assert 1 <= len(calls) <= 14
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--agent-horizons", "25,x"])
    assert "--agent-horizons: want comma-separated positive integers" in capsys.readouterr().err


def test_context_weight_adds_the_context_tokens_and_never_the_padding():
    """``context_weight``: every non-answer, non-padding target at that weight; the answers keep theirs."""
    m = _one_layer_model()
    pad = 0
    ids = torch.randint(1, 64, (1, 12))
    ids[0, 10:] = pad  # two padding tokens at the end of the row
    tmask = torch.zeros(1, 12, dtype=torch.bool)
    tmask[0, 6:10] = True  # the answer: targets 6-9
    batch = Batch(ids, tmask)
    with torch.no_grad():
        per_token = torch.nn.functional.cross_entropy(m(ids)[0][:-1], ids[0, 1:], reduction="none")
        loss = masked_loss(m, batch, decision_weight=5.0, context_weight=0.5, pad_id=pad)
        assert torch.equal(masked_loss(m, batch, decision_weight=5.0, context_weight=0.0, pad_id=pad),
                           masked_loss(m, batch, decision_weight=5.0))
    # targets 1-5 are context (0.5), 6 opens the answer (5), 7-9 are answer tokens (1), 10-11 padding (none)
    picked = per_token[0:9]
    weights = torch.tensor([0.5] * 5 + [5.0, 1.0, 1.0, 1.0])
    torch.testing.assert_close(loss, (picked * weights).sum() / weights.sum(), rtol=1e-5, atol=1e-6)
    torch.manual_seed(3)
    with torch.no_grad():  # a share draws some of the context each call, never the padding
        drawn = {round(masked_loss(m, batch, context_weight=1.0, context_share=0.5, pad_id=pad).item(), 6)
                 for _ in range(20)}
    assert len(drawn) > 1
    with pytest.raises(ValueError, match="pad_id"):
        masked_loss(m, batch, context_weight=0.5)


def test_context_options_are_checked_on_the_command_line(capsys):
    with pytest.raises(SystemExit):
        train_main(["--context-share", "0", "--steps", "1"])
    assert "--context-share: share 0 is not a number in (0, 1]" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_main(["--context-weight", "0.3", "--group-size", "4", "--steps", "1"])
    assert "--context-weight needs one document per row" in capsys.readouterr().err
