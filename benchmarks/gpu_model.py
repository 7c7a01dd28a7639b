"""A random-weight, Qwen2-shaped decode stack built only from the Triton kernel ops and plain PyTorch.

Why it exists: the GPU check must measure what the kernels buy at a realistic model shape (BF16 vs INT4 weights,
BF16 vs FP8 KV pages, the cost of the fused page-tag check) without downloading a checkpoint and without depending on
the engine's model code.  Every variant runs the same non-matmul ops, so differences between variants come from the
weights / KV format alone.  The step has no host synchronisation, so it can be captured in a CUDA graph, which removes
Python launch overhead that would otherwise hide the kernels' speed at batch 1.

Layout per layer: (residual add +) RMSNorm -> fused QKV projection -> bias + RoPE + split -> write_kv -> paged
decode attention -> O projection -> residual add + RMSNorm -> fused gate/up -> SiLU * up -> down; then final norm, a
BF16 LM head (kept BF16 in both variants, as INT4 deployments usually do) and greedy argmax.  Norm, RoPE and SiLU are
the fused kernels of ``gpu_fused``; ``rms_norm_ref`` / ``rope_ref`` are their plain-PyTorch references.
The page tags are pool-wide (shared by all layers), so the stack checks them once per step, in layer 0's attention.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from gpu_fused import add_rms_norm, bias_rope_split, silu_mul

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

    def __init__(self, w: torch.Tensor, int4: bool, group: int) -> None:
        self.int4: Int4Weight | None = quantize_int4(w, group) if int4 else None
        self.w = None if int4 else w.to(torch.bfloat16)
        if self.int4 is not None:  # move the packed tensors next to the activations
            p = self.int4
            self.int4 = Int4Weight(p.qweight.to(w.device), p.scales.to(w.device), None, p.group_size,
                                   p.in_features, p.out_features)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.int4 is not None:
            p = self.int4
            return int4_linear_impl(x, p.qweight, p.scales, p.zeros, p.group_size)
        return F.linear(x, self.w)

    def nbytes(self) -> int:
        return self.int4.nbytes() if self.int4 is not None else self.w.numel() * 2


def rms_norm_ref(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def rope_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    c, s = cos.float(), sin.float()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


class DecodeStack:
    """Batch ``batch`` sequences, each with ``context`` tokens already in its KV pages; ``step()`` decodes one token.

    The position of the decoded token stays fixed across steps (each step overwrites the same slot), so every replay
    measures a decode step at exactly ``context`` tokens of context.
    """

    def __init__(self, shape: ModelShape, *, weights: str, kv: str, batch: int, context: int,
                 device: torch.device, page_size: int = 16, group: int = 128, check_tags: bool = True,
                 seed: int = 0, share_weights_from: DecodeStack | None = None, int4_lm_head: bool = False) -> None:
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
                    "qkv": Linear(rnd(qkv_out, s.hidden), weights == "int4", group),
                    "qkv_bias": rnd(qkv_out),
                    "o": Linear(rnd(s.hidden, s.heads * s.head_dim), weights == "int4", group),
                    "gate_up": Linear(rnd(2 * s.intermediate, s.hidden), weights == "int4", group),
                    "down": Linear(rnd(s.hidden, s.intermediate), weights == "int4", group),
                })
            self.embed = rnd(s.vocab, s.hidden)  # tied LM head, BF16 in every variant
            self.final_norm = torch.ones(s.hidden, dtype=torch.bfloat16, device=device)
        self.weights = weights
        # optional INT4 LM head: at 0.5B the BF16 head is ~60% of an INT4 model's bytes and caps its speed-up
        self.lm_head = Linear(self.embed, True, group) if int4_lm_head else None
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
        return lin + (self.lm_head.nbytes() if self.lm_head is not None else self.embed.numel() * 2)

    def step(self) -> torch.Tensor:
        s, B = self.shape, self.batch
        x = self.embed[self.tokens]  # residual stream, updated in place by add_rms_norm
        delta = None
        for li, (layer, (kp, vp, ks, vs)) in enumerate(zip(self.layers, self.pools)):
            h = add_rms_norm(x, delta, layer["in_norm"])
            q, k, v = bias_rope_split(layer["qkv"](h), layer["qkv_bias"], self.cos, self.sin,
                                      s.heads, s.kv_heads, s.head_dim)
            write_kv(k, v, kp, vp, ks, vs, self.slots)
            check = self.check_tags and li == 0
            attn, bad = paged_decode_attention_impl(q, kp, vp, ks, vs, self.block_tables, self.seq_lens,
                                                    self.page_tags, self.expected_tags, self.scale,
                                                    check_tags=check)
            if check:
                self.bad = bad  # a static output of the captured graph; no extra kernel
            h = add_rms_norm(x, layer["o"](attn.reshape(B, -1)), layer["post_norm"])
            delta = layer["down"](silu_mul(layer["gate_up"](h)))
        h = add_rms_norm(x, delta, self.final_norm)
        logits = self.lm_head(h) if self.lm_head is not None else F.linear(h, self.embed)
        self.tokens.copy_(torch.argmax(logits, dim=-1))
        return self.tokens
