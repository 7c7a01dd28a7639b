"""A random-weight, Qwen2-shaped decode stack built only from the Triton kernel ops and plain PyTorch.

Why it exists: the GPU check must measure what the kernels buy at a realistic model shape (BF16 vs INT4 weights,
BF16 vs FP8 KV pages, the cost of the fused page-tag check) without downloading a checkpoint and without depending on
the engine's model code.  Every variant runs the same non-matmul ops, so differences between variants come from the
weights / KV format alone.  The step has no host synchronisation, so it can be captured in a CUDA graph, which removes
Python launch overhead that would otherwise hide the kernels' speed at batch 1.

Layout per layer: RMSNorm -> fused QKV projection (+bias, as Qwen2) -> RoPE -> write_kv -> paged decode attention ->
O projection -> residual -> RMSNorm -> fused gate/up -> SiLU * up -> down -> residual; then final norm and a BF16
LM head (kept BF16 in both variants, as INT4 deployments usually do) and greedy argmax.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from reference_engine.kernels.triton_attention import paged_decode_attention_impl
from reference_engine.kernels.triton_int4 import int4_linear_impl
from reference_engine.kernels.triton_ops import write_kv
from reference_engine.quant import Int4Weight, quantize_int4


@dataclass(frozen=True)
class ModelShape:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int


SHAPES = {
    "qwen2.5-0.5b": ModelShape("qwen2.5-0.5b", 896, 24, 14, 2, 64, 4864, 151936),
    "qwen2.5-1.5b": ModelShape("qwen2.5-1.5b", 1536, 28, 12, 2, 128, 8960, 151936),
    "smoke": ModelShape("smoke", 128, 2, 4, 2, 32, 256, 256),
}


class Linear:
    """A projection held either as a dense BF16 weight (cuBLAS via F.linear) or as an Int4Weight (Triton kernel)."""

    def __init__(self, w: torch.Tensor, bias: torch.Tensor | None, int4: bool, group: int) -> None:
        self.bias = bias
        self.int4: Int4Weight | None = quantize_int4(w, group) if int4 else None
        self.w = None if int4 else w.to(torch.bfloat16)
        if self.int4 is not None:  # move the packed tensors next to the activations
            p = self.int4
            self.int4 = Int4Weight(p.qweight.to(w.device), p.scales.to(w.device), None, p.group_size,
                                   p.in_features, p.out_features)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.int4 is not None:
            p = self.int4
            y = int4_linear_impl(x, p.qweight, p.scales, p.zeros, p.group_size)
            return y if self.bias is None else y + self.bias
        return F.linear(x, self.w, self.bias)

    def nbytes(self) -> int:
        return self.int4.nbytes() if self.int4 is not None else self.w.numel() * 2


def _rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


class DecodeStack:
    """Batch ``batch`` sequences, each with ``context`` tokens already in its KV pages; ``step()`` decodes one token.

    The position of the decoded token stays fixed across steps (each step overwrites the same slot), so every replay
    measures a decode step at exactly ``context`` tokens of context.
    """

    def __init__(self, shape: ModelShape, *, weights: str, kv: str, batch: int, context: int,
                 device: torch.device, page_size: int = 16, group: int = 128, check_tags: bool = True,
                 seed: int = 0, share_weights_from: "DecodeStack | None" = None) -> None:
        self.shape, self.batch, self.context, self.check_tags = shape, batch, context, check_tags
        self.device, self.page_size = device, page_size
        g = torch.Generator(device=device).manual_seed(seed)  # on the device: a 1.5B model in seconds
        s = shape
        qkv_out = (s.heads + 2 * s.kv_heads) * s.head_dim

        def rnd(*size: int, std: float = 0.02) -> torch.Tensor:
            return (torch.randn(*size, generator=g, device=device) * std).to(torch.bfloat16)

        if share_weights_from is not None and share_weights_from.weights == weights:
            self.layers = share_weights_from.layers
            self.embed, self.final_norm = share_weights_from.embed, share_weights_from.final_norm
        else:
            self.layers = []
            for _ in range(s.layers):
                self.layers.append({
                    "in_norm": torch.ones(s.hidden, dtype=torch.bfloat16, device=device),
                    "post_norm": torch.ones(s.hidden, dtype=torch.bfloat16, device=device),
                    "qkv": Linear(rnd(qkv_out, s.hidden), rnd(qkv_out), weights == "int4", group),
                    "o": Linear(rnd(s.hidden, s.heads * s.head_dim), None, weights == "int4", group),
                    "gate_up": Linear(rnd(2 * s.intermediate, s.hidden), None, weights == "int4", group),
                    "down": Linear(rnd(s.hidden, s.intermediate), None, weights == "int4", group),
                })
            self.embed = rnd(s.vocab, s.hidden)  # tied LM head, BF16 in every variant
            self.final_norm = torch.ones(s.hidden, dtype=torch.bfloat16, device=device)
        self.weights = weights
        self._build_kv(kv, g)
        half = s.head_dim // 2
        inv_freq = 1.0 / (1_000_000.0 ** (torch.arange(half, dtype=torch.float32) / half))
        ang = (context - 1) * inv_freq
        self.cos = torch.cos(ang).to(device=device, dtype=torch.bfloat16)
        self.sin = torch.sin(ang).to(device=device, dtype=torch.bfloat16)
        self.tokens = torch.randint(0, s.vocab, (batch,), generator=g, device=device)
        self.bad = torch.zeros(batch, dtype=torch.bool, device=device)
        self.scale = 1.0 / math.sqrt(s.head_dim)

    def _build_kv(self, kv: str, g: torch.Generator) -> None:
        s, B, P = self.shape, self.batch, self.page_size
        pages_per_seq = -(-self.context // P)
        num_pages = B * pages_per_seq
        self.kv = kv
        perm = torch.randperm(num_pages, generator=g, device=self.device)
        self.block_tables = perm.reshape(B, pages_per_seq).to(torch.int32)
        self.page_tags = torch.randint(1, 2**40, (num_pages,), generator=g, device=self.device)
        self.expected_tags = self.page_tags[self.block_tables.long()]
        self.seq_lens = torch.full((B,), self.context, dtype=torch.int32, device=self.device)
        pos = self.context - 1
        self.slots = (self.block_tables[:, pos // P].long() * P + pos % P).contiguous()
        self.pools = []
        shape = (num_pages, P, s.kv_heads, s.head_dim)
        for _ in range(s.layers):
            if kv == "fp8":
                kp = (torch.randn(shape, device=self.device) * 100).to(torch.float8_e4m3fn)
                vp = (torch.randn(shape, device=self.device) * 100).to(torch.float8_e4m3fn)
                ks = torch.full((num_pages, s.kv_heads), 0.01, device=self.device)
                vs = torch.full((num_pages, s.kv_heads), 0.01, device=self.device)
            else:
                kp = torch.randn(shape, device=self.device, dtype=torch.bfloat16)
                vp = torch.randn(shape, device=self.device, dtype=torch.bfloat16)
                ks = vs = None
            self.pools.append((kp, vp, ks, vs))

    def kv_bytes(self) -> int:
        total = 0
        for kp, vp, ks, vs in self.pools:
            for t in (kp, vp, ks, vs):
                if t is not None:
                    total += t.numel() * t.element_size()
        return total

    def weight_bytes(self) -> int:
        lin = sum(layer[k].nbytes() for layer in self.layers for k in ("qkv", "o", "gate_up", "down"))
        return lin + self.embed.numel() * 2

    def _rope(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * self.cos - x2 * self.sin, x2 * self.cos + x1 * self.sin], dim=-1)

    def step(self) -> torch.Tensor:
        s, B = self.shape, self.batch
        x = self.embed[self.tokens]
        for layer, (kp, vp, ks, vs) in zip(self.layers, self.pools):
            h = _rms_norm(x, layer["in_norm"])
            qkv = layer["qkv"](h)
            q = qkv[:, : s.heads * s.head_dim].view(B, s.heads, s.head_dim)
            k = qkv[:, s.heads * s.head_dim:(s.heads + s.kv_heads) * s.head_dim].view(B, s.kv_heads, s.head_dim)
            v = qkv[:, (s.heads + s.kv_heads) * s.head_dim:].view(B, s.kv_heads, s.head_dim)
            q, k = self._rope(q), self._rope(k)
            write_kv(k, v.contiguous(), kp, vp, ks, vs, self.slots)
            attn, bad = paged_decode_attention_impl(q, kp, vp, ks, vs, self.block_tables, self.seq_lens,
                                                    self.page_tags, self.expected_tags, self.scale,
                                                    check_tags=self.check_tags)
            self.bad |= bad
            x = x + layer["o"](attn.reshape(B, -1))
            h = _rms_norm(x, layer["post_norm"])
            gu = layer["gate_up"](h)
            x = x + layer["down"](F.silu(gu[:, : s.intermediate]) * gu[:, s.intermediate:])
        logits = F.linear(_rms_norm(x, self.final_norm), self.embed)
        self.tokens.copy_(torch.argmax(logits, dim=-1))
        return self.tokens
