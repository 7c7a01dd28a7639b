"""The shipped checkpoint (reference_engine/models/verifier-tiny/): format, tokenizer, template, parity, behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import torch
from tokenizers import Tokenizer

from reference_engine.launch import default_model_path, start_server
from training.chat_format import CHAT_TEMPLATE, MARKER_TOKENS, SPECIAL_TOKENS, render

MODEL_DIR: Path = default_model_path()
CORE_SUITE = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"

pytestmark = pytest.mark.skipif(not (MODEL_DIR / "model.safetensors").exists(),
                                reason="shipped checkpoint not present")

TOOLS = [{"type": "function", "function": {
    "name": "get_forecast", "description": "Multi-day weather forecast.",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"},
                                                    "days": {"type": "integer", "minimum": 1, "maximum": 14}},
                   "required": ["location", "days"]}}}]


def test_checkpoint_files_and_size():
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json"):
        assert (MODEL_DIR / name).is_file(), name
    assert (MODEL_DIR / "model.safetensors").stat().st_size <= 20 * 1024 * 1024
    cfg = json.loads((MODEL_DIR / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    # INT4 decode uses group size 128: every linear layer's input width must be a multiple of it
    assert cfg["hidden_size"] % 128 == 0 and cfg["intermediate_size"] % 128 == 0


def test_tokenizer_round_trips_and_keeps_markers():
    tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    text = 'Ünïcode ✓ 東京 {"a": [1, 2.5e-3]}\n\ttabs  and  spaces <tool_call>{"name": "x"}</tool_call>'
    enc = tok.encode(text, add_special_tokens=False)
    assert tok.decode(enc.ids, skip_special_tokens=False) == text
    for marker in MARKER_TOKENS + SPECIAL_TOKENS:
        ids = tok.encode(marker, add_special_tokens=False).ids
        assert len(ids) == 1, marker
    # markers survive skip_special_tokens (the engine's parser needs them); control tokens do not
    ids = tok.encode("<|im_start|>assistant\n<tool_call>{}</tool_call><|im_end|>", add_special_tokens=False).ids
    assert tok.decode(ids, skip_special_tokens=True) == "assistant\n<tool_call>{}</tool_call>"


def test_chat_template_renders_tools_and_tool_calls_identically_everywhere():
    from transformers import AutoTokenizer

    from reference_engine.chat_template import render_chat

    cfg = json.loads((MODEL_DIR / "tokenizer_config.json").read_text())
    assert cfg["chat_template"] == CHAT_TEMPLATE
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Forecast for Lima, 3 days"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "get_forecast", "arguments": json.dumps({"location": "Lima", "days": 3})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    ours = render(msgs, TOOLS, add_generation_prompt=True)
    assert "get_forecast(location:string, days:integer)" in ours
    assert '<tool_call>{"name": "get_forecast", "arguments": {"location": "Lima", "days": 3}}</tool_call>' in ours
    assert "<tool_response>sunny</tool_response>" in ours and ours.endswith("<|im_start|>assistant\n")
    engine = render_chat(cfg["chat_template"], msgs, tools=TOOLS, add_generation_prompt=True)
    hf = AutoTokenizer.from_pretrained(str(MODEL_DIR)).apply_chat_template(
        msgs, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert engine == ours == hf


@pytest.fixture(scope="module")
def fp32_server():
    with start_server(weights="fp32", kv_dtype="fp32", prefix_cache=False) as srv:
        yield srv


def test_engine_logits_match_transformers(fp32_server):
    from transformers import AutoModelForCausalLM

    tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    prompt = render([{"role": "user", "content": "Forecast for Lima, 3 days"}], TOOLS, add_generation_prompt=True)
    ids = tok.encode(prompt, add_special_tokens=False).ids
    r = httpx.post(f"{fp32_server.base_url}/x/distributions", json={"prompt_token_ids": ids, "start": 1}, timeout=120)
    r.raise_for_status()
    import base64

    import numpy as np

    body = r.json()
    engine = torch.from_numpy(np.frombuffer(base64.b64decode(body["logprobs_b64"]),
                                            dtype="<f4").reshape(body["shape"]).copy())
    hf = AutoModelForCausalLM.from_pretrained(str(MODEL_DIR), torch_dtype=torch.float32)
    with torch.no_grad():
        ref = torch.log_softmax(hf(torch.tensor([ids])).logits[0].float(), -1)[:-1]
    assert engine.shape == ref.shape
    torch.testing.assert_close(engine, ref, rtol=0, atol=2e-3)
    assert torch.equal(engine.argmax(-1), ref.argmax(-1))


def _held_out_single_tool_answers(n: int) -> list[tuple[object, dict]]:
    """Greedy replies to the first ``n`` held-out toolcall-core cases that offer one tool and expect a call."""
    from verifier.kinds.toolcall.suite_format import load_jsonl

    cases = [c for c in load_jsonl(CORE_SUITE).cases
             if c.expected is not None and len(c.body.get("tools") or []) == 1 and len(c.body["messages"]) == 2][:n]
    assert len(cases) == n
    return _replay(cases)


def _replay(cases: list) -> list[tuple[object, dict]]:
    """(case, greedy reply message) for each case, through a bf16 engine server; eight requests in flight, so the
    engine batches them, as `training.evaluate` (whose figures the model card reports) does."""
    from concurrent.futures import ThreadPoolExecutor

    with start_server() as srv, httpx.Client(timeout=300) as client:
        def reply(c) -> dict:
            body = {**c.body, "model": srv.model, "temperature": 0, "max_tokens": 160}
            return client.post(f"{srv.base_url}/chat/completions", json=body).json()["choices"][0]["message"]

        with ThreadPoolExecutor(8) as pool:
            out = list(zip(cases, pool.map(reply, cases)))
    return out


#: held-out cases replayed by the behaviour tests. Forty, not eight: the shipped model names the offered tool
#: in about 60% of them, and eight cases are too few to tell 60% from 40% (a retrained checkpoint of the same
#: quality flipped the old 5-of-8 check); forty take about 15 s on 2 cores.
N_HELD_OUT = 40


@pytest.fixture(scope="module")
def held_out_answers() -> list[tuple[object, dict]]:
    return _held_out_single_tool_answers(N_HELD_OUT)


@pytest.mark.slow
def test_held_out_requests_get_well_formed_calls_of_the_offered_tool(held_out_answers):
    """The shipped model has learnt the protocol: a parsed ``tool_calls`` entry naming the offered tool whose
    arguments are a JSON object. (A random or untrained checkpoint produces none of this.)"""
    well_formed = 0
    for c, msg in held_out_answers:
        calls = msg.get("tool_calls") or []
        if not calls or calls[0]["function"]["name"] != c.expected.tool:
            continue
        try:
            well_formed += isinstance(json.loads(calls[0]["function"]["arguments"]), dict)
        except json.JSONDecodeError:
            continue
    # half: far above an untrained checkpoint (none) and below the shipped model's ~60% (MODEL_CARD.md)
    assert well_formed >= N_HELD_OUT // 2, \
        f"only {well_formed}/{N_HELD_OUT} held-out requests got a well-formed call of the offered tool"


#: the reported cases of MODEL_CARD.md: the first 300 of toolcall-core (forty hold about 29 calls, where a single
#: invalid one already reads as 0.966)
N_QUALITY_BAR = 300


@pytest.fixture(scope="module")
def first_core_answers() -> list[tuple[object, dict]]:
    """Greedy replies to the first N_QUALITY_BAR toolcall-core cases as the suite has them (any number of offered
    tools, 30 % with no fitting tool): the mix the issue's quality bar is stated on."""
    from verifier.kinds.toolcall.suite_format import load_jsonl

    return _replay(load_jsonl(CORE_SUITE).cases[:N_QUALITY_BAR])


@pytest.mark.slow
def test_held_out_cases_meet_the_quality_bar(first_core_answers):
    """Issue #5's bar on the first N_QUALITY_BAR cases: trigger F1 >= 0.95, schema accuracy >= 0.97 (the shipped
    checkpoint since the eleventh session: 0.993 and 0.986 on the first 300)."""
    from verifier.kinds.toolcall.checks import check_call

    tp = fp = fn = calls = valid = 0
    for c, msg in first_core_answers:
        tool_calls = msg.get("tool_calls") or []
        expected = c.expected is not None
        tp += expected and bool(tool_calls)
        fp += (not expected) and bool(tool_calls)
        fn += expected and not tool_calls
        for call in tool_calls[:1]:
            calls += 1
            valid += check_call(call["function"]["name"], call["function"]["arguments"], c.tools()).valid
    f1 = 2 * tp / max(1, 2 * tp + fp + fn)
    assert f1 >= 0.95 and calls and valid / calls >= 0.97, \
        f"trigger F1 {f1:.2f} (tp {tp}, fp {fp}, fn {fn}), schema accuracy {valid}/{calls}"


@pytest.mark.slow
def test_forced_calls_of_the_shipped_model_parse_and_validate():
    """With ``tool_choice`` naming the function the engine writes the call's header and the model writes the
    arguments. The header must end where the model's own tokenisation would (before the space that BPE merges
    with the opening brace); a header ending in a lone space token left this model writing unparseable
    arguments, and only 11 of 192 toolcall-schemas cases came back as calls (MODEL_CARD.md)."""
    from verifier.kinds.toolcall.checks import check_call
    from verifier.kinds.toolcall.suite_format import load_jsonl

    suite = CORE_SUITE.with_name("toolcall-schemas.jsonl")
    answers = _replay(load_jsonl(suite).cases[:24])
    valid = 0
    for c, msg in answers:
        calls = msg.get("tool_calls") or []
        assert calls and calls[0]["function"]["name"] == c.forced_tool(), msg
        valid += check_call(calls[0]["function"]["name"], calls[0]["function"]["arguments"], c.tools()).valid
    # the shipped model: 188 of 192 valid over the whole suite; 20 of 24 leaves room for a retrain's noise
    assert valid >= 20, f"only {valid}/24 forced calls validate against their schema"
