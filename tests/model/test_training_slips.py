"""Slip-and-recovery agent trajectories (``--agent-slip-share``): a refused, miscopied call shown as context,
never as a target, followed by the oracle's right call."""

from __future__ import annotations

import json
import random

import pytest
import torch

from suites.agent.base import Action
from suites.agent.scenarios import make_env
from training.batching import NOT_A_TARGET, Batch, encode_all
from training.chat_format import assistant_spans
from training.corpus import agent_conversations, slipped_action
from training.tokenizer_train import train_tokenizer
from training.train import main as train_main
from training.train import masked_loss


@pytest.fixture(scope="module")
def slipped():
    return list(agent_conversations(120, seed=6, slip_share=0.5))


def _assistant_indices(messages: list[dict]) -> list[int]:
    return [i for i, m in enumerate(messages) if m["role"] == "assistant"]


def test_slipped_action_miscopies_one_character_of_one_string_argument():
    rng = random.Random(0)
    action = Action("move_file", {"src": "/inbox/kite-002.txt", "dst": "/photos"})
    for _ in range(50):
        slip = slipped_action(action, rng)
        assert slip.name == action.name and slip.arguments.keys() == action.arguments.keys()
        changed = [k for k in action.arguments if slip.arguments[k] != action.arguments[k]]
        assert len(changed) == 1
        before, after = action.arguments[changed[0]], slip.arguments[changed[0]]
        assert len(before) == len(after) and sum(a != b for a, b in zip(before, after)) == 1
    assert slipped_action(Action("transfer", {"amount": 5}), rng) is None


@pytest.mark.slow
def test_no_slips_leave_the_corpus_as_it_was(slipped):
    """Slips draw from their own stream: share 0 is the old corpus, and the trajectories without one are unchanged."""
    plain = list(agent_conversations(120, seed=6))
    assert [c.messages for c in plain] == [c.messages for c in agent_conversations(120, seed=6, slip_share=0.0)]
    assert all(not c.unsupervised_turns for c in plain)
    unchanged = [(a, b) for a, b in zip(plain, slipped) if not b.unsupervised_turns]
    assert len(unchanged) > 40
    assert all(a.messages == b.messages for a, b in unchanged)


def test_a_slip_is_refused_and_followed_by_the_oracles_right_call(slipped):
    with_slip = [c for c in slipped if c.unsupervised_turns]
    assert 20 <= len(with_slip) <= 60  # about half, less the trajectories with no slip the world refuses
    assert {c.source for c in with_slip} == {"agent:files", "agent:ledger", "agent:notes", "agent:tickets"}
    for c in with_slip:
        (k,) = c.unsupervised_turns
        at = _assistant_indices(c.messages)[k]
        slip_call = c.messages[at]["tool_calls"][0]["function"]
        assert c.messages[at + 1]["role"] == "tool" and c.messages[at + 1]["content"].startswith("error:")
        # the recovery call is kept and supervised: the same tool with the argument copied right
        recovery = c.messages[at + 2]
        assert recovery["role"] == "assistant"
        right = recovery["tool_calls"][0]["function"]
        assert right["name"] == slip_call["name"] and right["arguments"] != slip_call["arguments"]
        # replaying the kept calls on a fresh copy of the world: the slip is refused, the recovery accepted
        env = make_env(c.source.split(":")[1], c.meta["seed"], c.meta["horizon"])
        for _ in range(c.meta["slip"] - k):  # the calls cut from the front of the trajectory
            env.run_action(env.next_action())
        for i in _assistant_indices(c.messages):
            call = c.messages[i].get("tool_calls")
            if not call:
                break
            outcome = env.call(call[0]["function"]["name"], call[0]["function"]["arguments"])
            assert (outcome.error_kind is not None) == (i == at)
            if i + 1 < len(c.messages):
                assert outcome.result_text == c.messages[i + 1]["content"]


def test_the_slip_is_no_target_of_any_kind(slipped):
    """Its tokens are outside the answer mask, coded NOT_A_TARGET, and out of the context loss too."""
    c = next(c for c in slipped if c.unsupervised_turns)
    text = c.text()
    tok = train_tokenizer([x.text() for x in slipped[:40]], vocab_size=600)
    (doc,) = encode_all(tok, [text], None, [c.unsupervised_spans(text)])
    enc = tok.encode(text, add_special_tokens=False)
    starts = torch.tensor([o[0] for o in enc.offsets])
    slip_start, slip_end = c.unsupervised_spans(text)[0]
    in_slip = (starts >= slip_start) & (starts < slip_end)
    assert in_slip.sum() > 5
    mask = torch.from_numpy(doc.mask)
    schema = torch.from_numpy(doc.schema.astype("int64"))
    assert not mask[in_slip].any() and (schema[in_slip] == NOT_A_TARGET).all()
    # every other assistant turn is still a target
    others = [s for s in assistant_spans(text) if s != (slip_start, slip_end)]
    for a, b in others:
        assert mask[(starts >= a) & (starts < b)].all()

    # the loss: with every context token drawn, the slip's tokens are the only non-padding tokens left out
    vocab = tok.get_vocab_size()
    torch.manual_seed(0)
    from training.model import TinyConfig, TinyLlama
    m = TinyLlama(TinyConfig(vocab_size=vocab, hidden_size=128, intermediate_size=128, num_hidden_layers=1,
                             num_attention_heads=4, num_key_value_heads=2))
    ids = torch.tensor(doc.ids, dtype=torch.int64)[None]
    batch = Batch(ids, mask[None], schema=schema.to(torch.uint8)[None])
    pad = vocab  # no token is padding here
    with torch.no_grad():
        per_token = torch.nn.functional.cross_entropy(m(ids)[0][:-1], ids[0, 1:], reduction="none")
        loss = masked_loss(m, batch, context_weight=0.5, pad_id=pad)
    target_mask = mask[1:]
    weights = torch.where(target_mask, 1.0, 0.5)
    weights[in_slip[1:]] = 0.0
    torch.testing.assert_close(loss, (per_token * weights).sum() / weights.sum(), rtol=1e-5, atol=1e-6)


def test_slip_share_is_checked_on_the_command_line(capsys):
    with pytest.raises(SystemExit):
        train_main(["--agent-slip-share", "1", "--steps", "1"])
    assert "--agent-slip-share: share 1 is not a number in [0, 1)" in capsys.readouterr().err


def test_dumped_corpus_records_where_the_slip_is(slipped, tmp_path):
    from training.corpus import dump_jsonl

    dump_jsonl(slipped, str(tmp_path / "c.jsonl"))
    records = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert sum("slip" in r["meta"] for r in records) == sum(bool(c.unsupervised_turns) for c in slipped)
