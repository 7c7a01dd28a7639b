"""Shared-prefix training rows (``training.train --group-size K``): K requests over one system prompt and
tool list, the prefix computed once. They are only a saving if each request is trained exactly as it would
be on its own: the same tokens, the same positions, the same attention, the same loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from suites.toolcall.catalog import TOOLS_BY_NAME, _group, generate_case_groups
from training.batching import Batch, bucket_batches, document_texts, encode, encode_all, tree_mask, tree_positions
from training.corpus import ConversationGroup, agent_conversations, toolcall_groups
from training.model import TinyConfig, TinyLlama
from training.phrasings import TRAIN_PHRASINGS
from training.tokenizer_train import train_tokenizer
from training.train import masked_loss


@pytest.fixture(scope="module")
def groups() -> list[ConversationGroup]:
    return list(toolcall_groups(48, seed=5, size=4))


@pytest.fixture(scope="module")
def tok(groups):
    texts, _ = document_texts(groups)
    return train_tokenizer(texts, vocab_size=600)


@pytest.fixture(scope="module")
def model() -> TinyLlama:
    torch.manual_seed(0)
    return TinyLlama(TinyConfig(vocab_size=640, hidden_size=128, intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2))


def test_catalogue_groups_share_everything_but_the_final_request() -> None:
    groups = generate_case_groups(3, 200, 4, TRAIN_PHRASINGS, no_tool_share=0.35)
    kinds = {"tool": 0, "no_tool:chat": 0, "no_tool:unavailable": 0}
    for group in groups:
        assert len(group) == 4
        first = group[0][0]
        offered = {t["function"]["name"] for t in first["tools"]}
        for body, meta in group:
            assert body["tools"] == first["tools"] and body["messages"][:-1] == first["messages"][:-1]
            assert body["messages"][-1]["role"] == "user"
            expected = meta["expected"]
            if expected is not None:
                kinds["tool"] += 1
                assert expected["tool"] in offered  # the needed tool is offered
            elif "no_tool:unavailable" in meta["tags"]:
                kinds["no_tool:unavailable"] += 1
                absent = next(t for t in meta["tags"] if t.startswith("absent:")).split(":", 1)[1]
                # as in generate_cases: nothing offered is from the missing tool's domain group
                assert _group(TOOLS_BY_NAME[absent]) not in {_group(TOOLS_BY_NAME[n]) for n in offered}
            else:
                kinds["no_tool:chat"] += 1
    share = (kinds["no_tool:chat"] + kinds["no_tool:unavailable"]) / 800
    assert 0.30 < share < 0.40 and kinds["no_tool:unavailable"] > 80 and kinds["no_tool:chat"] > 80
    # reproducible from the seed
    assert generate_case_groups(3, 5, 4, TRAIN_PHRASINGS) == generate_case_groups(3, 5, 4, TRAIN_PHRASINGS)


def test_a_renamed_group_renames_its_tools_alike_in_every_member(groups) -> None:
    renamed = 0
    for g in groups:
        names = [[t["function"]["name"] for t in c.tools] for c in g.members]
        assert all(n == names[0] for n in names)
        for c in g.members:
            calls = c.messages[-1].get("tool_calls") or []
            assert all(call["function"]["name"] in names[0] for call in calls)
        renamed += any("_v2" in n or not n.startswith(("get_", "search_", "create_", "send_")) for n in names[0])
    assert renamed > 0


def test_group_tokens_are_the_prefix_tokens_then_each_requests_own(groups, tok) -> None:
    texts, starts = document_texts(groups)
    docs = encode_all(tok, texts, starts)
    for g, doc in zip(groups[:8], docs):
        prefix, finals = g.parts()
        expected = encode(tok, prefix).ids.tolist()
        for i, final in enumerate(finals, 1):
            own = encode(tok, final).ids.tolist()
            expected += own
            assert int(np.sum(doc.segments == i)) == len(own)
        assert doc.ids.tolist() == expected
        assert int(np.sum(doc.segments == 0)) == len(encode(tok, prefix).ids)
        # supervised: every member's answer, and an earlier exchange's answer in the shared history once
        n_prefix = len(encode(tok, prefix).ids)
        members = [encode(tok, c.text()) for c in g.members]
        assert int(doc.mask.sum()) == int(members[0].mask[:n_prefix].sum()) + sum(
            int(m.mask[n_prefix:].sum()) for m in members)


@pytest.mark.slow
def test_each_request_in_a_group_row_gets_the_logits_it_gets_alone(groups, tok, model) -> None:
    texts, starts = document_texts(groups[:3])
    for g, doc in zip(groups[:3], encode_all(tok, texts, starts)):
        ids = torch.from_numpy(doc.ids.astype(np.int64))[None]
        seg = torch.from_numpy(doc.segments)[None]
        with torch.no_grad():
            row = model(ids, positions=torch.from_numpy(tree_positions(doc.segments))[None],
                        attn_mask=tree_mask(seg))[0]
        n_prefix = int((seg == 0).sum())
        for i, member in enumerate(g.members, 1):
            alone = torch.from_numpy(encode(tok, member.text()).ids.astype(np.int64))[None]
            with torch.no_grad():
                expected = model(alone)[0]
            torch.testing.assert_close(row[seg[0] == i], expected[n_prefix:], rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(row[seg[0] == 0], expected[:n_prefix], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_a_group_row_trains_with_the_summed_loss_of_its_members(groups, tok, model) -> None:
    """Same loss (token-weighted mean) and the same gradient as the members batched one per row (for a group
    without an earlier exchange: one in the shared history is supervised once, not once per member)."""
    g = next(g for g in groups if "<|im_start|>assistant" not in g.parts()[0])
    texts, starts = document_texts([g])
    (row,) = bucket_batches(encode_all(tok, texts, starts), 4096, pad_id=0, seed=0)
    assert row.segments is not None and row.positions is not None
    alone = bucket_batches([encode(tok, c.text()) for c in g.members], 1 << 16, pad_id=0, seed=0)
    assert len(alone) == 1 and alone[0].segments is None

    def loss_and_grad(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        model.zero_grad()
        loss = masked_loss(model, batch)
        loss.backward()
        return loss.detach(), model.model.layers[0].self_attn.q_proj.weight.grad.clone()

    loss_row, grad_row = loss_and_grad(row)
    loss_alone, grad_alone = loss_and_grad(alone[0])
    torch.testing.assert_close(loss_row, loss_alone, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(grad_row, grad_alone, rtol=1e-3, atol=1e-6)


def test_group_rows_are_batched_apart_from_plain_documents(groups, tok) -> None:
    agents = list(agent_conversations(4, seed=6))
    texts, starts = document_texts(groups + agents)
    docs = encode_all(tok, texts, starts)
    batches = bucket_batches(docs, 2048, pad_id=0, seed=0)
    assert sum(b.ids.shape[0] for b in batches) == len(docs)
    assert sum(int(b.targets.sum()) for b in batches) == sum(int(d.mask.sum()) for d in docs)
    plain = [b for b in batches if b.segments is None]
    grouped = [b for b in batches if b.segments is not None]
    assert plain and grouped
    assert sum(b.ids.shape[0] for b in grouped) >= len(groups) - 1  # at most one batch mixes the two kinds
    for b in grouped:
        assert not b.targets[b.ids == 0].any()


def test_tree_mask_lets_a_request_see_the_prefix_and_itself_only() -> None:
    seg = torch.tensor([[0, 0, 1, 1, 2, 2, 0]])  # prefix, request 1, request 2, padding
    m = tree_mask(seg)[0, 0]
    assert m[3].tolist() == [True, True, True, True, False, False, False]
    assert m[5].tolist() == [True, True, False, False, True, True, False]
    assert m[6].tolist() == [True, True, False, False, False, False, True]  # padding sees the prefix: no NaN
    assert tree_positions(np.array([0, 0, 1, 1, 2, 2], np.int16)).tolist() == [0, 1, 2, 3, 2, 3]
