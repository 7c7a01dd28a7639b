"""Scheduler behaviour under memory pressure, chat-template parity with transformers, the `serve` command."""

from __future__ import annotations

import json

import pytest

from reference_engine.config import ModelConfig
from reference_engine.kv_cache import bytes_per_page

from .conftest import Collector, greedy, make_engine, solo_tokens


def test_preemption_under_a_full_pool_keeps_results_exact(llama_ckpt):
    cfg = ModelConfig.from_file(llama_ckpt / "config.json")
    prompts = [list(range(7 + i, 27 + i)) for i in range(4)]      # 20 tokens each
    ref = solo_tokens(llama_ckpt, prompts, 30, page_size=8)
    # 14 pages of 8 = 112 tokens for 4 requests that grow to 50 tokens each (7 pages): someone must be preempted
    eng = make_engine(llama_ckpt, page_size=8, kv_budget_bytes=14 * bytes_per_page(cfg, "fp32", 8), prefix_cache=False)
    cols = [Collector() for _ in prompts]
    for i, (p, c) in enumerate(zip(prompts, cols)):
        eng.submit(f"r{i}", p, greedy(30), c)
    eng.run_until_idle()
    assert eng.metrics.preemptions > 0
    for c, r in zip(cols, ref):
        assert c.error is None and c.tokens == r
    assert eng.blocks.num_free == eng.pool.num_pages


def test_eos_and_stop_token_ids_end_generation(ckpt_factory):
    import tempfile
    from pathlib import Path

    from reference_engine.sequence import SamplingParams
    from reference_engine.tiny_checkpoint import ASSISTANT_START, build_scripted_checkpoint

    path = build_scripted_checkpoint(Path(tempfile.mkdtemp()), [[ASSISTANT_START, "one", "two", "three"]])
    eng = make_engine(path)
    from reference_engine.chat_template import render_chat

    prompt = eng.tokenizer.encode(render_chat(eng.tokenizer.chat_template, [{"role": "user", "content": "go"}]))
    a, b = Collector(), Collector()
    eng.submit("a", prompt, SamplingParams(temperature=0, max_tokens=10), a)
    two = eng.tokenizer.token_to_id("two")
    eng.submit("b", prompt, SamplingParams(temperature=0, max_tokens=10, stop_token_ids=(two,)), b)
    eng.run_until_idle()
    assert [eng.tokenizer.decode([t]) for t in a.tokens[:3]] == ["one", "two", "three"]
    assert a.finish.reason == "stop" and a.tokens[-1] in eng.eos_ids and len(a.tokens) == 4
    assert b.tokens[-1] == two and b.finish.reason == "stop"


def test_chat_template_renders_like_transformers(llama_ckpt):
    transformers = pytest.importorskip("transformers")
    from reference_engine.chat_template import render_chat
    from reference_engine.tokenizer import Tokenizer

    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(llama_ckpt / "tokenizer.json"))
    tok = Tokenizer(llama_ckpt)
    tools = [{"type": "function", "function": {"name": "f", "description": "é ünïcode",
                                               "parameters": {"type": "object",
                                                              "properties": {"a": {"type": "integer"}}}}}]
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "2"}]
    ours = render_chat(tok.chat_template, msgs, tools=tools, add_generation_prompt=True)
    theirs = hf.apply_chat_template(msgs, tools=tools, add_generation_prompt=True, tokenize=False,
                                    chat_template=tok.chat_template)
    assert ours == theirs
    # OpenAI sends arguments as a JSON string: normalised to the object the template expects
    msgs[2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"a": 1})
    assert render_chat(tok.chat_template, msgs, tools=tools) == theirs


def test_serve_command_rejects_a_bad_model_clearly(tmp_path):
    typer = pytest.importorskip("typer")
    from typer.testing import CliRunner

    from reference_engine.cli import serve

    app = typer.Typer()
    app.command()(serve)
    res = CliRunner().invoke(app, ["--model", str(tmp_path / "missing"), "--port", "0"])
    assert res.exit_code == 2
    assert "model folder not found" in res.output
    res = CliRunner().invoke(app, ["--help"])
    assert "--kv-dtype" in res.output and "--decode-weights" in res.output and "--no-prefix-cache" in res.output


def test_a_request_that_outgrows_the_whole_pool_ends_with_length(llama_ckpt):
    cfg = ModelConfig.from_file(llama_ckpt / "config.json")
    eng = make_engine(llama_ckpt, page_size=8, kv_budget_bytes=3 * bytes_per_page(cfg, "fp32", 8))   # 24 tokens
    c = Collector()
    eng.submit("r", list(range(5, 15)), greedy(100), c)
    eng.run_until_idle(max_steps=200)
    assert c.finish is not None and c.finish.reason == "length"
    assert len(c.tokens) == 15          # 24 slots hold the prompt + 14 fed-back tokens; the 15th needs none
    assert eng.blocks.num_free == 3


def test_constrained_start_then_json_object(llama_ckpt):
    """A JsonConstraint with forced starts (as tool_choice "required" builds it): the output begins with one of the
    start sequences, then stays a well-formed JSON object prefix, under random sampling with six seeds."""
    from reference_engine.constraints import ROOT_OBJECT, JsonConstraint, TokenTable, feed
    from reference_engine.sequence import SamplingParams

    eng = make_engine(llama_ckpt)
    tok = eng.tokenizer
    table = TokenTable([tok.token_bytes(i) for i in range(eng.model_config.vocab_size)], set(tok.special_ids),
                       eng.eos_ids)
    cols = [Collector() for _ in range(6)]
    for i, c in enumerate(cols):
        cons = JsonConstraint(table, ROOT_OBJECT, starts=((7, 8, 9), (7, 10)))
        eng.submit(f"r{i}", list(range(5, 25)), SamplingParams(temperature=1.5, max_tokens=12, seed=i,
                                                               constraint=cons), c)
    eng.run_until_idle()
    for c in cols:
        t = c.tokens
        assert t[0] == 7 and t[1] in (8, 10)
        rest = t[3:] if t[1] == 8 else t[2:]
        if t[1] == 8:
            assert t[2] == 9
        body = b"".join(tok.token_bytes(x) for x in rest if x not in eng.eos_ids)
        assert body.lstrip()[:1] == b"{" and feed(ROOT_OBJECT, body) is not None, body
    assert len({tuple(c.tokens[3:]) for c in cols}) > 1       # the model still chooses within the constraint
