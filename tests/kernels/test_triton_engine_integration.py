"""The reference engine running on the Triton kernels end to end (interpreted on a CPU, compiled on a GPU): the same
greedy tokens as on the engine's PyTorch ops with FP8 KV pages and INT4 decode weights, and an injected page
reassignment caught by the fused tag check for exactly the victim request."""
from __future__ import annotations

import pytest
from kernel_env import DEVICE  # sets TRITON_INTERPRET on CPU before the kernels are imported

from reference_engine import kernels
from reference_engine.kernels import torch_ops, triton_ops

try:  # the engine needs tokenizers/safetensors/jinja2, which a bare GPU box running gpu_check.sh may lack
    from reference_engine.config import EngineConfig
    from reference_engine.engine import Engine, ErrorEvent, TokenEvent
    from reference_engine.sequence import SamplingParams
    from reference_engine.tiny_checkpoint import build_checkpoint
except ImportError as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"reference engine not importable here: {exc}", allow_module_level=True)

PROMPTS = [list(range(5, 26)), list(range(40, 49)), list(range(60, 79))]
NEW_TOKENS = 4


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return build_checkpoint(tmp_path_factory.mktemp("ckpt-triton"), "qwen2", hidden=64, layers=2, heads=4,
                            kv_heads=2, intermediate=128, vocab=512)


def _run(ckpt, backend, monkeypatch, fault: str | None = None) -> dict[str, list]:
    monkeypatch.setattr(kernels, "backend_for", lambda t: backend)
    eng = Engine(EngineConfig(model_path=ckpt, weights="bf16", decode_weights="int4", int4_group_size=32,
                              kv_dtype="fp8", page_size=8, device=DEVICE.type, threads=1,
                              allow_fault_injection=fault is not None))
    events: dict[str, list] = {}
    for i, p in enumerate(PROMPTS):
        events[f"r{i}"] = []
        eng.submit(f"r{i}", p, SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, ignore_eos=True),
                   events[f"r{i}"].append)
    if fault is not None:
        eng.step()  # prefill
        eng.step()  # first decode
        eng.inject_fault(fault)
    eng.run_until_idle()
    return events


def _tokens(evs: list) -> list[int]:
    return [e.choice.token_id for e in evs if isinstance(e, TokenEvent)]


@pytest.mark.slow
def test_same_greedy_tokens_as_torch_ops_and_fault_caught(ckpt, monkeypatch):
    want = _run(ckpt, torch_ops, monkeypatch)
    got = _run(ckpt, triton_ops, monkeypatch, fault="r1")  # one run: cheaper under the interpreter
    err = [e for e in got["r1"] if isinstance(e, ErrorEvent)]
    assert err and err[0].type == "kv_integrity_error" and err[0].status == 500
    assert 0 < len(_tokens(got["r1"])) < NEW_TOKENS
    assert _tokens(got["r1"]) == _tokens(want["r1"])[: len(_tokens(got["r1"]))]  # right until the fault
    for rid in ("r0", "r2"):
        assert not any(isinstance(e, ErrorEvent) for e in got[rid])
        assert _tokens(got[rid]) == _tokens(want[rid]), rid
