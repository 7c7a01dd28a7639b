"""Load a Hugging Face checkpoint folder into `model.CausalLM`.

Reads `config.json` and the safetensors weights (single file, or shards listed in `model.safetensors.index.json`, or
any `*.safetensors`), fuses q/k/v and gate/up into one matrix each (fewer, larger matmuls), and converts every
projection to the requested prefill and decode weight formats. INT4 is quantised here, at load, from the checkpoint's
bf16/fp32 weights (round-to-nearest, see quant.py).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from reference_engine.config import ConfigError, EngineConfig, ModelConfig
from reference_engine.model import MLP, Attention, CausalLM, DecoderLayer, PhasedLinear, WLinear
from reference_engine.quant import quantize_int4
from reference_engine.tokenizer import Tokenizer

log = logging.getLogger(__name__)

_DENSE = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def default_compute_dtype(device: str) -> torch.dtype:
    """fp32 on CPU (CPU bf16 matmuls are slower here and the reference should not add rounding), bf16 on GPU."""
    return torch.bfloat16 if str(device).startswith("cuda") else torch.float32


def safetensors_files(model_dir: Path) -> list[Path]:
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError) as e:
            raise ConfigError(f"{index}: cannot read 'weight_map' ({e})") from None
        return [model_dir / f for f in sorted(set(weight_map.values()))]
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"{model_dir}: no *.safetensors weights found")
    return files


def load_tensors(model_dir: Path) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for f in safetensors_files(model_dir):
        if not f.exists():
            raise ConfigError(f"{f}: weight shard listed in the index is missing")
        with safe_open(str(f), framework="pt") as sf:
            for key in sf.keys():
                name = key[len("model."):] if key.startswith("model.") else key
                tensors[name] = sf.get_tensor(key)
    return tensors


class _Builder:
    def __init__(self, cfg: ModelConfig, tensors: dict[str, torch.Tensor], source: Path, *, weights: str,
                 decode_weights: str, group_size: int, dtype: torch.dtype, device: str) -> None:
        self.cfg, self.t, self.source = cfg, tensors, source
        self.formats = (weights, decode_weights)
        self.group_size, self.dtype, self.device = group_size, dtype, device

    def get(self, name: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
        if name not in self.t:
            raise ConfigError(f"{self.source}: weight '{name}' missing from the checkpoint")
        x = self.t[name]
        if shape is not None and tuple(x.shape) != shape:
            raise ConfigError(f"{self.source}: weight '{name}' has shape {tuple(x.shape)}, config implies {shape}")
        return x

    def dense(self, w: torch.Tensor, fmt: str, *, relayout: bool = True) -> torch.Tensor:
        """Round to the format's precision, hold in the compute dtype. On CPU, stored input-major: same [out, in]
        shape and values, but the memory is the contiguous [in, out] matrix, seen transposed.

        Why: ``F.linear(x, w)`` computes ``x @ w.T``; with ``w`` row-major, MKL copies (packs) the whole weight on
        every call, which on a small batch costs as much as the product itself (profile of
        ``benchmarks/engine_decode.py``: about a third of a decode step at batch 8). Input-major, ``w.T`` is the
        plain matrix BLAS reads in place: 25-35 % faster for the wide projections at batch 8-32 (fp32), with the same
        bits for batches of two or more rows and bf16 (measured: max |diff| 0); a single fp32 row takes another
        kernel (differences ~1e-6). GPUs keep the checkpoint's layout (cuBLAS reads either without copying)."""
        w = w.to(_DENSE[fmt]).to(self.dtype).to(self.device)
        if relayout and torch.device(self.device).type == "cpu":
            return w.t().contiguous().t()
        return w.contiguous()

    def one(self, w: torch.Tensor, b: torch.Tensor | None, fmt: str) -> WLinear:
        bias = b.to(self.dtype).to(self.device) if b is not None else None
        if fmt == "int4":
            g = _group_for(w.shape[1], self.group_size)
            if g is None:
                log.warning("in_features %d has no usable int4 group size; keeping this projection in bf16", w.shape[1])
                return WLinear(self.dense(w, "bf16"), bias)
            p = quantize_int4(w.float(), g)
            p.qweight, p.scales = p.qweight.to(self.device), p.scales.to(self.device)
            return WLinear(p, bias)
        return WLinear(self.dense(w, fmt), bias)

    def phased(self, w: torch.Tensor, b: torch.Tensor | None = None) -> PhasedLinear:
        pre_fmt, dec_fmt = self.formats
        pre = self.one(w, b, pre_fmt)
        dec = pre if dec_fmt == pre_fmt else self.one(w, b, dec_fmt)
        return PhasedLinear(pre, dec)

    def build(self) -> CausalLM:
        c = self.cfg
        hd, h, kvh = c.head_dim, c.num_heads, c.num_kv_heads
        embed = self.get("embed_tokens.weight", (c.vocab_size, c.hidden_size)).to(self.dtype).to(self.device)
        layers = []
        for i in range(c.num_layers):
            p = f"layers.{i}."
            q = self.get(p + "self_attn.q_proj.weight", (h * hd, c.hidden_size))
            k = self.get(p + "self_attn.k_proj.weight", (kvh * hd, c.hidden_size))
            v = self.get(p + "self_attn.v_proj.weight", (kvh * hd, c.hidden_size))
            bias = None
            if c.attention_bias:
                bias = torch.cat([self.get(p + f"self_attn.{n}_proj.bias") for n in "qkv"])
            o = self.get(p + "self_attn.o_proj.weight", (c.hidden_size, h * hd))
            o_bias = self.t.get(p + "self_attn.o_proj.bias")
            attn = Attention(c, i, self.phased(torch.cat([q, k, v]), bias), self.phased(o, o_bias))
            if attn.q_norm is not None and attn.k_norm is not None:  # both exist exactly when c.qk_norm
                attn.q_norm.weight.data = self.get(p + "self_attn.q_norm.weight", (hd,)).to(self.dtype).to(self.device)
                attn.k_norm.weight.data = self.get(p + "self_attn.k_norm.weight", (hd,)).to(self.dtype).to(self.device)
            gate = self.get(p + "mlp.gate_proj.weight", (c.intermediate_size, c.hidden_size))
            up = self.get(p + "mlp.up_proj.weight", (c.intermediate_size, c.hidden_size))
            down = self.get(p + "mlp.down_proj.weight", (c.hidden_size, c.intermediate_size))
            mlp = MLP(self.phased(torch.cat([gate, up])), self.phased(down))
            layer = DecoderLayer(c, attn, mlp)
            layer.input_layernorm.weight.data = self.get(p + "input_layernorm.weight").to(self.dtype).to(self.device)
            layer.post_attention_layernorm.weight.data = (
                self.get(p + "post_attention_layernorm.weight").to(self.dtype).to(self.device))
            layers.append(layer)
        if c.tie_word_embeddings or "lm_head.weight" not in self.t:
            head_w = embed
        else:
            head_w = self.get("lm_head.weight", (c.vocab_size, c.hidden_size))
        # the output projection stays dense (as GPTQ/AWQ do): it is one matrix and the logits feed every metric
        head_fmt = [f if f != "int4" else "bf16" for f in self.formats]
        tied = head_w is embed                 # a tied head keeps sharing the embedding (no second copy)
        head_pre = WLinear(self.dense(head_w, head_fmt[0], relayout=not tied), None)
        head_dec = head_pre if head_fmt[1] == head_fmt[0] else WLinear(
            self.dense(head_w, head_fmt[1], relayout=not tied), None)
        model = CausalLM(c, embed, layers, PhasedLinear(head_pre, head_dec))
        model.norm.weight.data = self.get("norm.weight", (c.hidden_size,)).to(self.dtype).to(self.device)
        return model.to(self.device).eval()


def _group_for(k: int, preferred: int) -> int | None:
    """The preferred group size if it divides K, else the largest power of two >= 16 below it that does."""
    g = preferred
    while g >= 16:
        if k % g == 0:
            return g
        g //= 2
    return None


def load_model(model_dir: str | Path, *, weights: str = "bf16", decode_weights: str | None = None,
               group_size: int = 128, device: str = "cpu", dtype: torch.dtype | None = None
               ) -> tuple[ModelConfig, CausalLM]:
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ConfigError(f"{model_dir}: model folder not found")
    cfg = ModelConfig.from_file(model_dir / "config.json")
    tensors = load_tensors(model_dir)
    builder = _Builder(cfg, tensors, model_dir, weights=weights, decode_weights=decode_weights or weights,
                       group_size=group_size, dtype=dtype or default_compute_dtype(device), device=device)
    return cfg, builder.build()


@dataclass(frozen=True)
class LoadedModel:
    """What an engine reads from its checkpoint: the tokenizer and the weights in its prefill/decode formats.

    Read-only once built (the forward pass writes only the KV pool), so engines that differ in nothing but KV
    cache options can share one (:class:`reference_engine.engine_process.SharedLoads`).
    """

    tokenizer: Tokenizer
    model_config: ModelConfig
    model: CausalLM


def weights_key(config: EngineConfig) -> tuple[str, str, str, int, str]:
    """What decides the loaded weights of an engine: engines with the same key can share one :class:`LoadedModel`."""
    return (str(config.model_path.resolve()), config.weights, config.decode_weight_format, config.int4_group_size,
            config.device)


def load_for(config: EngineConfig, tokenizer: Tokenizer | None = None) -> LoadedModel:
    """Read the tokenizer (unless given), then the weights in ``config``'s formats."""
    tokenizer = tokenizer or Tokenizer(config.model_path)
    model_config, model = load_model(config.model_path, weights=config.weights,
                                     decode_weights=config.decode_weight_format, group_size=config.int4_group_size,
                                     device=config.device)
    return LoadedModel(tokenizer, model_config, model)
