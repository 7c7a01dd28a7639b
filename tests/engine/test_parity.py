"""Our logits match transformers' (fp32, within 1e-4) for Llama, Qwen2, Qwen3: prefill and paged decode."""

from __future__ import annotations

import pytest
import torch

from reference_engine.sequence import SamplingParams

from .conftest import Collector, greedy, make_engine

transformers = pytest.importorskip("transformers")

FAMILIES = {
    "llama": dict(rope_theta=50000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 32}),
    "llama_tied_mha": dict(tie=True, kv_heads=4),
    "qwen2": dict(),
    "qwen3": dict(head_dim=32),
}


def hf_logprobs(path, ids: list[int]) -> torch.Tensor:
    key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"   # renamed in v5
    model = transformers.AutoModelForCausalLM.from_pretrained(path, **{key: torch.float32}).eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    return torch.log_softmax(logits.float(), dim=-1)


@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.slow
def test_prefill_and_decode_match_transformers(ckpt_factory, name):
    family = name.split("_")[0]
    path = ckpt_factory(family, **FAMILIES[name])
    eng = make_engine(path, page_size=4)            # small pages: decode crosses many page boundaries
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, eng.model_config.vocab_size, (23,), generator=g).tolist()

    # prefill: full next-token distributions for every prompt position
    dist = Collector()
    eng.submit("dist", prompt, SamplingParams(temperature=0.0, max_tokens=0, full_distribution_from=1), dist)
    # decode: 12 greedy tokens, with the top-20 logprobs at each step, through the paged cache
    dec = Collector()
    eng.submit("dec", prompt, greedy(12, logprobs=True, top_logprobs=20), dec)
    eng.run_until_idle()

    ours = next(e for e in dist.events if hasattr(e, "logprobs") and isinstance(e.logprobs, torch.Tensor)).logprobs
    full = prompt + dec.tokens
    ref = hf_logprobs(path, full)
    assert ours.shape == (len(prompt) - 1, ref.shape[1])
    assert torch.allclose(ours, ref[: len(prompt) - 1], atol=1e-4, rtol=0), (ours - ref[: len(prompt) - 1]).abs().max()

    for step, ch in enumerate(dec.choices):
        row = ref[len(prompt) - 1 + step]
        assert ch.token_id == int(row.argmax())
        assert abs(ch.logprob - float(row[ch.token_id])) < 1e-4
        top_ids = [t for t, _ in ch.top]
        assert torch.allclose(torch.tensor([v for _, v in ch.top]), row[top_ids], atol=1e-4, rtol=0)


def test_batched_decode_equals_alone(ckpt_factory):
    """Continuous batching must not change a request's result: same tokens alone or in a batch of 5."""
    path = ckpt_factory("qwen2")
    prompts = [list(range(3, 3 + n)) for n in (5, 17, 9, 30, 2)]
    alone = []
    for p in prompts:
        eng = make_engine(path, page_size=4)
        c = Collector()
        eng.submit("a", p, greedy(10, logprobs=True), c)
        eng.run_until_idle()
        alone.append(c)
    eng = make_engine(path, page_size=4)
    together = [Collector() for _ in prompts]
    for i, (p, c) in enumerate(zip(prompts, together)):
        eng.submit(f"b{i}", p, greedy(10, logprobs=True), c)
    eng.run_until_idle()
    for a, b in zip(alone, together):
        assert a.tokens == b.tokens
        assert max(abs(x.logprob - y.logprob) for x, y in zip(a.choices, b.choices)) < 1e-4


def test_unsupported_architecture_is_a_clear_error(tmp_path, llama_ckpt):
    import json
    import shutil

    from reference_engine.config import ConfigError
    from reference_engine.loader import load_model

    bad = tmp_path / "gpt2"
    shutil.copytree(llama_ckpt, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["architectures"] = ["GPT2LMHeadModel"]
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="GPT2LMHeadModel.*not supported"):
        load_model(bad)
    (bad / "config.json").write_text("{\n  \"architectures\": [\n")
    with pytest.raises(ConfigError, match="config.json: line"):
        load_model(bad)


@pytest.mark.slow
def test_shipped_model_loads_and_matches_transformers():
    """The shipped checkpoint goes through the same loader with no special case, and agrees with transformers."""
    from reference_engine.launch import default_model_path

    path = default_model_path()
    if not (path / "config.json").exists():
        pytest.skip("shipped model not built yet")
    eng = make_engine(path)
    from reference_engine.chat_template import render_chat

    text = render_chat(eng.tokenizer.chat_template, [{"role": "user", "content": "What is the weather in Paris?"}],
                       tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {
                           "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
    prompt = eng.tokenizer.encode(text)
    dec = Collector()
    eng.submit("dec", prompt, greedy(8, logprobs=True, top_logprobs=5), dec)
    eng.run_until_idle()
    ref = hf_logprobs(path, prompt + dec.tokens)
    for step, ch in enumerate(dec.choices):
        row = ref[len(prompt) - 1 + step]
        assert abs(ch.logprob - float(row[ch.token_id])) < 1e-4
        assert ch.token_id == int(row.argmax())
