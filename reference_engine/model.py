"""Decoder-only transformer for the Llama / Qwen2 / Qwen3 families, reading and writing a paged KV cache.

One forward call handles either a prefill batch (several sequences' new tokens, flattened) or a decode batch (one token
per sequence). Linear layers can hold two weight formats at once (prefill and decode), as in disaggregated serving where
compute-bound prefill and bandwidth-bound decode are quantised differently; `phase` picks which one a call uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from reference_engine import kernels
from reference_engine.config import ModelConfig, RopeConfig
from reference_engine.dense_kv import DenseKV
from reference_engine.kernels import torch_ops
from reference_engine.kv_cache import KVPool
from reference_engine.quant import Int4Weight


@dataclass
class PrefillSegment:
    """One sequence inside a prefill batch: rows [start, start+length) of the flattened tokens."""

    start: int
    length: int
    num_cached: int                          # tokens already in the cache before this chunk (prefix hits)
    block_table: torch.Tensor                # int64 pages covering the cached tokens


@dataclass
class AttnMetadata:
    slot_mapping: torch.Tensor               # [T] int64
    prefill: list[PrefillSegment] | None = None
    block_tables: torch.Tensor | None = None  # decode: [B, P] int32
    seq_lens: torch.Tensor | None = None      # decode: [B] int32
    expected_tags: torch.Tensor | None = None  # decode: [B, P] int64
    check_tags: bool = True
    tag_mismatch: torch.Tensor | None = field(default=None)  # filled by the forward pass (decode)
    plan: torch_ops.DecodePlan | None = field(default=None)  # CPU decode: built by the first layer, used by all
    dense: DenseKV | None = None              # CPU decode: the batch's K/V kept across steps (dense_kv.py)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim), requires_grad=False)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            # the same ops in the same order as below (x * rsqrt(mean(x^2) + eps), then * weight), dispatched once
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)

    __call__ = forward  # hot path, no hooks registered: skip nn.Module.__call__'s hook dispatch


def rope_inv_freq(rope: RopeConfig, head_dim: int) -> torch.Tensor:
    """Inverse frequencies, with Llama-3 frequency-dependent scaling when the config asks for it."""
    inv = 1.0 / (rope.theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    if rope.rope_type == "llama3":
        low_wl = rope.original_max_position_embeddings / rope.low_freq_factor
        high_wl = rope.original_max_position_embeddings / rope.high_freq_factor
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wl, inv / rope.factor, inv)
        smooth = (rope.original_max_position_embeddings / wavelen - rope.low_freq_factor) / (
            rope.high_freq_factor - rope.low_freq_factor
        )
        smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
        medium = (wavelen >= high_wl) & (wavelen <= low_wl)
        inv = torch.where(medium, smoothed, scaled)
    return inv


class Rotary(nn.Module):
    cos: torch.Tensor  # buffers (registered below), typed for readers and the type checker
    sin: torch.Tensor

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        inv = rope_inv_freq(cfg.rope, cfg.head_dim)
        t = torch.arange(cfg.max_position_embeddings, dtype=torch.float32)
        freqs = torch.outer(t, inv)
        cos, sin = freqs.cos(), freqs.sin()
        # full width: [cos, cos] and [-sin, sin], so a rotation is two products and a sum over the whole head
        self.register_buffer("cos", torch.cat([cos, cos], dim=-1), persistent=False)
        self.register_buffer("sin", torch.cat([-sin, sin], dim=-1), persistent=False)

    def tables(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, signed sin [T, 1, D] for these positions: looked up once per forward, shared by all layers."""
        return self.cos[positions][:, None, :].to(dtype), self.sin[positions][:, None, :].to(dtype)

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x [T, heads, D], rotate-half convention (as HF): [x1 cos - x2 sin, x2 cos + x1 sin], bit for bit (negating
        sin is exact, and each half is still one rounded product per term and one rounded sum)."""
        return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * sin


#: rows a CPU dense linear computes at least, in a step that holds a measured request (see WLinear.forward)
BATCH_INVARIANT_ROWS = 4


@dataclass
class MinRows:
    """The fewest rows every dense linear of one model computes this step (the engine sets it per step; one object
    shared by all the model's linears). 1: as many as given. Why not always 4: padding one row to four costs 2-3x
    per linear, and a request nobody measures (no logprobs, no distributions, no forced tokens) has no need."""

    rows: int = 1


class WLinear(nn.Module):
    """y = x W^T (+ b) with W dense or INT4-packed."""

    def __init__(self, weight: torch.Tensor | Int4Weight, bias: torch.Tensor | None) -> None:
        super().__init__()
        if isinstance(weight, Int4Weight):
            self.packed: Int4Weight | None = weight
            self.weight: nn.Parameter | None = None
        else:
            self.packed = None
            self.weight = nn.Parameter(weight, requires_grad=False)
        self.bias = nn.Parameter(bias, requires_grad=False) if bias is not None else None
        self.min_rows = MinRows()      # replaced by the model's shared one (CausalLM.__init__)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None:
            y = kernels.int4_linear(x, self.packed)
            return y + self.bias if self.bias is not None else y
        assert self.weight is not None  # dense exactly when not packed (__init__)
        m, floor = x.shape[0], self.min_rows.rows
        if 0 < m < floor and x.device.type == "cpu" and x.dim() == 2:
            # MKL's fp32 GEMM rounds 1-3 rows differently from 4 or more (another kernel): padded with zero rows,
            # a measured request's logits do not depend on how many others share its step
            x = torch.cat([x, x.new_zeros(floor - m, x.shape[1])])
            return F.linear(x, self.weight, self.bias)[:m]
        return F.linear(x, self.weight, self.bias)

    __call__ = forward  # hot path, no hooks registered: skip nn.Module.__call__'s hook dispatch


class PhasedLinear(nn.Module):
    """The same projection in a prefill format and a decode format (the same module when the formats agree)."""

    def __init__(self, prefill: WLinear, decode: WLinear) -> None:
        super().__init__()
        self.prefill = prefill
        self.decode = decode

    def forward(self, x: torch.Tensor, phase: str) -> torch.Tensor:
        return (self.decode if phase == "decode" else self.prefill)(x)

    __call__ = forward  # hot path, no hooks registered: skip nn.Module.__call__'s hook dispatch


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int, qkv: PhasedLinear, o: PhasedLinear) -> None:
        super().__init__()
        self.layer = layer
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.q_size = cfg.num_heads * cfg.head_dim
        self.kv_size = cfg.num_kv_heads * cfg.head_dim
        self.scale = cfg.head_dim ** -0.5
        self.qkv_proj, self.o_proj = qkv, o
        self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps) if cfg.qk_norm else None

    def forward(self, x, rope: tuple[torch.Tensor, torch.Tensor], pool: KVPool, meta: AttnMetadata,
                phase: str) -> torch.Tensor:
        t, n_q = x.shape[0], self.num_heads
        qkv = self.qkv_proj(x, phase)
        # q and k side by side as [T, heads + kv_heads, D]: one rotation covers both
        qk = qkv[:, : self.q_size + self.kv_size].reshape(t, n_q + self.num_kv_heads, self.head_dim)
        v = qkv[:, self.q_size + self.kv_size:].reshape(t, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:  # both or neither (cfg.qk_norm)
            qk = torch.cat([self.q_norm(qk[:, :n_q]), self.k_norm(qk[:, n_q:])], dim=1)
        qk = Rotary.rotate(qk, *rope)
        q, k = qk[:, :n_q], qk[:, n_q:]
        kp, vp, ks, vs = pool.layer(self.layer)
        kernels.write_kv(k, v, kp, vp, ks, vs, meta.slot_mapping, pages_distinct=meta.prefill is None)
        if meta.prefill is not None:
            out = self._prefill_attention(q, k, v, kp, vp, ks, vs, meta.prefill)
        else:
            out = self._decode_attention(q, k, v, kp, vp, ks, vs, pool, meta)
        return self.o_proj(out.reshape(t, self.q_size), phase)

    __call__ = forward  # hot path, no hooks registered: skip nn.Module.__call__'s hook dispatch

    def _decode_attention(self, q, k, v, kp, vp, ks, vs, pool: KVPool, meta: AttnMetadata) -> torch.Tensor:
        if kernels.backend_for(q) is not torch_ops:   # fused kernels check the tags in every layer at no extra cost
            out, mismatch = kernels.paged_decode_attention(
                q, kp, vp, ks, vs, meta.block_tables, meta.seq_lens,
                pool.page_tags if meta.check_tags else None, meta.expected_tags, self.scale)
            if meta.check_tags:
                meta.tag_mismatch = mismatch if meta.tag_mismatch is None else (meta.tag_mismatch | mismatch)
            return out
        if meta.plan is None:
            # Tags cannot change between layers of one step (one engine thread): the first layer checks them for the
            # step, and its gather indices and mask serve every layer.
            assert meta.block_tables is not None and meta.seq_lens is not None
            if meta.check_tags and meta.expected_tags is not None:
                meta.tag_mismatch = torch_ops.check_tags(pool.page_tags, meta.block_tables, meta.expected_tags)
                mismatch = meta.tag_mismatch
            else:
                mismatch = torch.zeros(q.shape[0], dtype=torch.bool, device=q.device)
            meta.plan = torch_ops.decode_plan(meta.block_tables, meta.seq_lens, kp.shape[1], mismatch)
        if meta.dense is not None:
            return meta.dense.attention(self.layer, q, k, v, kp, vp, meta.plan, self.scale, ks, vs)
        return torch_ops.planned_decode_attention(q, kp, vp, ks, vs, meta.plan, self.scale)

    def _prefill_attention(self, q, k, v, kp, vp, ks, vs, segments: list[PrefillSegment]) -> torch.Tensor:
        """Causal attention per sequence: the new tokens' fresh K/V, after the cached prefix read back from pages.

        Each sequence alone (not padded into one call with the others): then a prompt's logits do not depend on
        which other prompts shared its step, so the same request gives the same bits in any batch (the default
        run's forced-decoding KL of a variant against itself is exactly 0). Inputs go in as one-sequence batches
        [1, heads, length, D]: SDPA's fused CPU kernel takes 4-D inputs only, and is about twice as fast as the
        unfused path 3-D inputs take (measured: 10 new tokens after 100 cached, bf16, 87 -> 44 us per call).
        """
        outs = []
        gqa = self.num_heads != self.num_kv_heads
        for seg in segments:
            sl = slice(seg.start, seg.start + seg.length)
            qs, kn, vn = q[sl], k[sl], v[sl]
            if seg.num_cached:
                kc = kernels.gather_kv(kp, ks, seg.block_table, seg.num_cached, q.dtype)
                vc = kernels.gather_kv(vp, vs, seg.block_table, seg.num_cached, q.dtype)
                kn, vn = torch.cat([kc, kn]), torch.cat([vc, vn])
                qpos = torch.arange(seg.length, device=q.device)[:, None] + seg.num_cached
                mask = torch.arange(kn.shape[0], device=q.device)[None, :] <= qpos
                o = F.scaled_dot_product_attention(
                    qs.transpose(0, 1)[None], kn.transpose(0, 1)[None], vn.transpose(0, 1)[None], attn_mask=mask,
                    scale=self.scale, enable_gqa=gqa)
            else:
                o = F.scaled_dot_product_attention(
                    qs.transpose(0, 1)[None], kn.transpose(0, 1)[None], vn.transpose(0, 1)[None], is_causal=True,
                    scale=self.scale, enable_gqa=gqa)
            outs.append(o[0].transpose(0, 1))
        return torch.cat(outs) if len(outs) > 1 else outs[0]


class MLP(nn.Module):
    def __init__(self, gate_up: PhasedLinear, down: PhasedLinear) -> None:
        super().__init__()
        self.gate_up_proj, self.down_proj = gate_up, down

    def forward(self, x: torch.Tensor, phase: str) -> torch.Tensor:
        gate, up = self.gate_up_proj(x, phase).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate, inplace=True).mul_(up), phase)   # in place: the fused output is ours

    __call__ = forward  # hot path, no hooks registered: skip nn.Module.__call__'s hook dispatch


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, attn: Attention, mlp: MLP) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn, self.mlp = attn, mlp

    def forward(self, x, rope, pool, meta, phase):
        x = x + self.self_attn(self.input_layernorm(x), rope, pool, meta, phase)
        return x + self.mlp(self.post_attention_layernorm(x), phase)

    __call__ = forward  # hot path, no hooks registered: skip nn.Module.__call__'s hook dispatch


class CausalLM(nn.Module):
    """Embeddings -> decoder layers -> final norm -> lm_head. Built by `loader.load_model`."""

    def __init__(self, cfg: ModelConfig, embed: torch.Tensor, layers: list[DecoderLayer],
                 lm_head: PhasedLinear) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding.from_pretrained(embed, freeze=True)
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = Rotary(cfg)
        self.lm_head = lm_head
        self.min_rows = MinRows()
        for module in self.modules():
            if isinstance(module, WLinear):
                module.min_rows = self.min_rows

    @property
    def dtype(self) -> torch.dtype:
        return self.embed_tokens.weight.dtype

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, pool: KVPool, meta: AttnMetadata,
                phase: str) -> torch.Tensor:
        """Hidden states [T, hidden] after the final norm; K/V of all T tokens are written to the pool."""
        x = self.embed_tokens(input_ids)
        rope = self.rotary.tables(positions, x.dtype)
        for layer in self.layers:
            x = layer(x, rope, pool, meta, phase)
        return self.norm(x)

    @torch.inference_mode()
    def logits(self, hidden: torch.Tensor, phase: str) -> torch.Tensor:
        return self.lm_head(hidden, phase).float()
