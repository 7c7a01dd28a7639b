"""``training.train --optimizer``: which parameters each optimizer owns, and that a Muon run really trains."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open

from tests.model.fixtures import TOY_ARCH_ARGS
from training.model import TinyConfig, TinyLlama
from training.optim import BatchedMuon, build_optimizers, is_hidden_matrix, orthogonalize
from training.train import main as train_main

TINY = TinyConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2)


def _owned(optimizers: list[torch.optim.Optimizer]) -> list[list[int]]:
    return [[id(p) for g in opt.param_groups for p in g["params"]] for opt in optimizers]


@pytest.mark.parametrize("kind", ["adamw", "muon"])
def test_every_parameter_is_updated_by_exactly_one_optimizer(kind: str) -> None:
    model = TinyLlama(TINY)
    owned = [pid for ids in _owned(build_optimizers(model, kind, 1e-3)) for pid in ids]
    assert sorted(owned) == sorted(id(p) for p in model.parameters())


def test_muon_owns_the_decoder_matrices_and_adamw_the_embeddings_head_and_norms() -> None:
    model = TinyLlama(TINY)
    muon, adamw = build_optimizers(model, "muon", 1e-3)
    assert isinstance(muon, BatchedMuon) and isinstance(adamw, torch.optim.AdamW)
    names = {id(p): n for n, p in model.named_parameters()}
    muon_names = {names[pid] for pid in _owned([muon])[0]}
    assert muon_names == {n for n, p in model.named_parameters() if p.dim() == 2 and ".layers." in n}
    assert "lm_head.weight" not in muon_names and "model.embed_tokens.weight" not in muon_names
    assert not is_hidden_matrix("model.layers.0.input_layernorm.weight", torch.ones(4))


@pytest.mark.parametrize("ns_dtype", [torch.float32, torch.bfloat16])
def test_batched_muon_takes_torch_muons_steps(ns_dtype: torch.dtype) -> None:
    """Same momentum, orthogonalisation and step size as ``torch.optim.Muon`` (which rounds through bfloat16), with
    the Newton-Schulz iteration in either precision."""
    torch.manual_seed(0)
    shapes = [(8, 16), (16, 8), (8, 16), (12, 12)]
    ours = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    start = [p.detach().clone() for p in ours]
    mine = BatchedMuon(ours, lr=0.1, weight_decay=0.1, ns_dtype=ns_dtype)
    reference = torch.optim.Muon(theirs, lr=0.1, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    for _ in range(3):
        grads = [torch.randn(s) for s in shapes]
        for p, q, g in zip(ours, theirs, grads):
            p.grad, q.grad = g.clone(), g.clone()
        mine.step()
        reference.step()
    for p, q, s0 in zip(ours, theirs, start):
        moved = (q.detach() - s0).norm().item()
        apart = (q.detach() - p.detach()).norm().item()
        # bfloat16 rounding of the reference (and, with ns_dtype bfloat16, of ours, in another order), nothing more
        assert apart < (0.02 if ns_dtype == torch.float32 else 0.04) * moved, (apart, moved)
        assert p.dtype == torch.float32


def test_bfloat16_orthogonalisation_is_close_to_float32() -> None:
    """The bfloat16 iteration is the same map, rounded: its result stays within bfloat16's error of float32's."""
    torch.manual_seed(1)
    updates = torch.randn(3, 16, 48)
    exact = orthogonalize(updates)
    rounded = orthogonalize(updates, dtype=torch.bfloat16)
    assert rounded.dtype == torch.bfloat16
    assert (rounded.float() - exact).norm() < 0.05 * exact.norm()
    assert (orthogonalize(updates * 7.0) - exact).abs().max() < 1e-4  # the scale of the update does not matter


def test_an_unknown_optimizer_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="optimizer 'sgd'"):
        build_optimizers(TinyLlama(TINY), "sgd", 1e-3)


@pytest.mark.slow
def test_muon_fits_a_fixed_batch() -> None:
    """Thirty steps on one batch must cut its loss well down: the split update trains every part of the model."""
    torch.manual_seed(0)
    model = TinyLlama(TINY)
    optimizers = build_optimizers(model, "muon", 1e-2)
    ids = torch.randint(0, TINY.vocab_size, (4, 24))

    def loss() -> torch.Tensor:
        logits = model(ids[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())

    first = loss().item()
    for _ in range(30):
        value = loss()
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        value.backward()
        for opt in optimizers:
            opt.step()
    assert loss().item() < 0.6 * first


@pytest.mark.slow
def test_the_optimizer_is_recorded_in_the_checkpoint(tmp_path, capsys) -> None:
    run = ["--n-toolcall", "60", "--n-agent", "6", "--seed", "11", "--steps", "5", "--time-limit-min", "5",
           "--threads", "1", "--optimizer", "muon", "--muon-ns-dtype", "bfloat16", "--out", str(tmp_path / "muon"),
           *TOY_ARCH_ARGS]
    train_main(run)
    assert "step 5/5 loss" in capsys.readouterr().out
    with safe_open(str(tmp_path / "muon" / "model.safetensors"), "pt") as f:
        assert f.metadata()["optimizer"] == "muon"
        assert f.metadata()["muon_ns_dtype"] == "bfloat16"
