"""The optimizers a training run can use, built for one model.

Why a choice at all: within a 45-minute, 2-core budget the checkpoint's quality follows the number of updates
(see training/JOURNAL.md, "Retrains"), so an optimizer that gets more out of each update is worth more than any kernel.
Muon (momentum orthogonalised by a Newton-Schulz iteration, ``torch.optim.Muon``) is reported to need fewer steps
than AdamW for a transformer's hidden matrices. It is defined for 2-D weights that map one hidden space to
another only, so the embeddings, the LM head and the norm gains stay with AdamW.

Why not ``torch.optim.Muon`` itself: it runs the Newton-Schulz iteration one matrix at a time, in bfloat16, which
on a CPU without bfloat16 units took 830 ms per step for this model (the whole AdamW step: 6 ms, a training step
about 200 ms). ``BatchedMuon`` computes the same update (the same momentum, coefficients and step-size rule; the
tests compare it with ``torch.optim.Muon``), stacking the matrices of one shape into one batched matrix product,
in float32 by default. ``ns_dtype=torch.bfloat16`` runs the iteration in bfloat16 as ``torch.optim.Muon`` does
(``training.train --muon-ns-dtype``). On the 2-core build machine, whose CPU has bfloat16 matrix units (AMX;
``bfloat16_matmul_is_fast``), that halves the orthogonalisation (28 to 13 ms for the shipped model's matrices, 2
threads) but the whole step gains only 1 to 4 % (``benchmarks/train_step.py``): worth having, not a new recipe.
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch import nn

OPTIMIZERS = ("adamw", "muon")
#: the precisions the Newton-Schulz iteration can run in
NS_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
ADAMW_BETAS = (0.9, 0.95)
WEIGHT_DECAY = 0.05


#: torch.optim.Muon's quintic Newton-Schulz coefficients and iteration count
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5


def bfloat16_matmul_is_fast() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AMX tiles or AVX512-BF16); without, bfloat16
    products are emulated and far slower than float32 ones."""
    return torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported()


def orthogonalize(updates: torch.Tensor, eps: float = 1e-7, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Approximately U V^T for each matrix U S V^T of a stack ``[n, rows, cols]`` (rows <= cols), computed (and
    returned) in ``dtype``."""
    a, b, c = NS_COEFFICIENTS
    x = updates.to(dtype)
    x = x / x.norm(dim=(1, 2), keepdim=True).clamp(min=eps)
    for _ in range(NS_STEPS):
        gram = x @ x.transpose(1, 2)
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x


class BatchedMuon(torch.optim.Optimizer):
    """Muon with Nesterov momentum and AdamW-matched step sizes (``torch.optim.Muon``'s ``match_rms_adamw``)."""

    def __init__(self, params, lr: float, weight_decay: float, momentum: float = 0.95,
                 ns_dtype: torch.dtype = torch.float32) -> None:
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay, "momentum": momentum})
        self.ns_dtype = ns_dtype

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001 - torch's Optimizer signature
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            by_shape: dict[tuple[int, int], list[torch.Tensor]] = defaultdict(list)
            for p in group["params"]:
                if p.grad is not None:
                    by_shape[tuple(p.shape)].append(p)
            for (rows, cols), params in by_shape.items():
                updates = []
                for p in params:
                    buf = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                    buf.lerp_(p.grad, 1 - momentum)
                    updates.append(p.grad.lerp(buf, momentum))
                stacked = torch.stack(updates)
                wide = rows > cols
                ortho = orthogonalize(stacked.transpose(1, 2) if wide else stacked, dtype=self.ns_dtype)
                ortho = ortho.transpose(1, 2) if wide else ortho
                step_size = lr * 0.2 * max(rows, cols) ** 0.5
                for p, o in zip(params, ortho):
                    p.mul_(1 - lr * group["weight_decay"])
                    p.add_(o.to(p.dtype), alpha=-step_size)


def is_hidden_matrix(name: str, param: torch.Tensor) -> bool:
    """A 2-D weight inside a decoder layer (attention or MLP projection): what Muon is meant for."""
    return param.dim() == 2 and ".layers." in f".{name}"


def build_optimizers(model: nn.Module, kind: str, lr: float,
                     ns_dtype: torch.dtype = torch.float32) -> list[torch.optim.Optimizer]:
    """The optimizers that together update every parameter of ``model`` once per step.

    ``adamw``: one AdamW, weight decay on every matrix (the shipped recipe). ``muon``: Muon on the decoder
    layers' matrices, with its step size scaled to match AdamW's update size (``match_rms_adamw``), so the same
    learning rate and schedule apply to both; AdamW on the rest. The caller sets ``lr`` on every group of every
    optimizer at each step.
    """
    if kind not in OPTIMIZERS:
        raise ValueError(f"optimizer {kind!r}: expected one of {', '.join(OPTIMIZERS)}")
    muon = kind == "muon"
    named = list(model.named_parameters())
    hidden = [p for n, p in named if muon and is_hidden_matrix(n, p)]
    rest = [p for n, p in named if not (muon and is_hidden_matrix(n, p))]
    adamw = torch.optim.AdamW([{"params": [p for p in rest if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
                               {"params": [p for p in rest if p.dim() < 2], "weight_decay": 0.0}],
                              lr=lr, betas=ADAMW_BETAS, eps=1e-8)
    if not muon:
        return [adamw]
    return [BatchedMuon(hidden, lr=lr, weight_decay=WEIGHT_DECAY, ns_dtype=ns_dtype), adamw]
