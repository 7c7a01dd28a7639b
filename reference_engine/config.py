"""Model and engine configuration.

`ModelConfig` is read from a Hugging Face `config.json`; it keeps only what the forward pass needs, so the model code
never touches raw dicts. Both the transformers<5 layout (`rope_theta`, `rope_scaling`) and the >=5 layout
(`rope_parameters`) are accepted because checkpoints of either vintage are in circulation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

# architecture name in config.json -> family the model code implements
SUPPORTED_ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
}

KV_DTYPES = ("bf16", "fp16", "fp32", "fp8")
WEIGHT_FORMATS = ("bf16", "fp16", "fp32", "int4")


class ConfigError(ValueError):
    """A checkpoint or engine setting we cannot serve; the message names the file and field."""


@dataclass(frozen=True)
class RopeConfig:
    theta: float = 10000.0
    rope_type: str = "default"          # "default" or "llama3"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass(frozen=True)
class ModelConfig:
    family: str                          # llama | qwen2 | qwen3
    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool                 # q/k/v projections carry a bias (Qwen2, some Llamas)
    qk_norm: bool                        # per-head RMSNorm on q and k before RoPE (Qwen3)
    rope: RopeConfig
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = field(default_factory=tuple)

    @classmethod
    def from_file(cls, path: Path) -> ModelConfig:
        try:
            raw = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"{path}: config.json not found") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: line {e.lineno}: invalid JSON ({e.msg})") from None
        return cls.from_dict(raw, source=str(path))

    @classmethod
    def from_dict(cls, raw: dict, *, source: str = "config.json") -> ModelConfig:
        archs = raw.get("architectures") or []
        arch = next((a for a in archs if a in SUPPORTED_ARCHITECTURES), None)
        if arch is None:
            raise ConfigError(
                f"{source}: field 'architectures' = {archs!r} is not supported "
                f"(supported: {', '.join(sorted(SUPPORTED_ARCHITECTURES))})"
            )
        family = SUPPORTED_ARCHITECTURES[arch]
        if raw.get("hidden_act", "silu") != "silu":
            raise ConfigError(f"{source}: field 'hidden_act' = {raw.get('hidden_act')!r}: only 'silu' (SwiGLU) is "
                              f"supported")

        def need(name: str) -> int:
            if name not in raw:
                raise ConfigError(f"{source}: missing field '{name}'")
            return int(raw[name])

        hidden = need("hidden_size")
        heads = need("num_attention_heads")
        head_dim = int(raw.get("head_dim") or hidden // heads)
        kv_heads = int(raw.get("num_key_value_heads") or heads)
        if heads % kv_heads:
            raise ConfigError(f"{source}: num_attention_heads={heads} is not a multiple of "
                              f"num_key_value_heads={kv_heads}")

        rope_raw = dict(raw.get("rope_parameters") or {})
        scaling = raw.get("rope_scaling") or {}
        rope_raw = {**scaling, **rope_raw}
        theta = float(rope_raw.get("rope_theta", raw.get("rope_theta", 10000.0)))
        rope_type = rope_raw.get("rope_type", rope_raw.get("type", "default")) or "default"
        if rope_type not in ("default", "llama3"):
            raise ConfigError(f"{source}: rope type {rope_type!r} is not supported (default, llama3)")
        rope = RopeConfig(
            theta=theta,
            rope_type=rope_type,
            factor=float(rope_raw.get("factor", 1.0)),
            low_freq_factor=float(rope_raw.get("low_freq_factor", 1.0)),
            high_freq_factor=float(rope_raw.get("high_freq_factor", 4.0)),
            original_max_position_embeddings=int(rope_raw.get("original_max_position_embeddings", 8192)),
        )
        eos = raw.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else ((eos,) if isinstance(eos, int) else ())
        default_bias = family == "qwen2"
        return cls(
            family=family,
            architecture=arch,
            vocab_size=need("vocab_size"),
            hidden_size=hidden,
            intermediate_size=need("intermediate_size"),
            num_layers=need("num_hidden_layers"),
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(raw.get("max_position_embeddings", 4096)),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            attention_bias=bool(raw.get("attention_bias", default_bias)) or family == "qwen2",
            qk_norm=family == "qwen3",
            rope=rope,
            bos_token_id=raw.get("bos_token_id") if isinstance(raw.get("bos_token_id"), int) else None,
            eos_token_ids=eos_ids,
        )


@dataclass
class EngineConfig:
    """How the engine serves a model (everything that is not the checkpoint itself)."""

    model_path: Path
    served_model_name: str | None = None
    kv_dtype: str = "bf16"
    weights: str = "bf16"                # prefill weight format
    decode_weights: str | None = None    # None = same as `weights`
    int4_group_size: int = 128
    prefix_cache: bool = True
    page_size: int = 16
    kv_budget_bytes: int | None = None   # None = default_kv_budget_bytes
    max_num_seqs: int = 256              # decode batch cap
    max_prefill_tokens: int = 4096       # prefill tokens per step
    max_waiting: int = 256               # queued requests beyond this get 429 at once
    admission_timeout_s: float = 10.0    # a request that waits this long for KV pages gets 503
    check_page_tags: bool = True
    allow_fault_injection: bool = False  # test-only switch; never on in `verifier serve`
    device: str = "cpu"
    threads: int | None = None

    default_kv_budget_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        self.model_path = Path(self.model_path)
        if self.kv_dtype not in KV_DTYPES:
            raise ConfigError(f"kv_dtype {self.kv_dtype!r} is not one of {', '.join(KV_DTYPES)}")
        for name in ("weights", "decode_weights"):
            val = getattr(self, name)
            if val is not None and val not in WEIGHT_FORMATS:
                raise ConfigError(f"{name} {val!r} is not one of {', '.join(WEIGHT_FORMATS)}")
        if self.page_size < 1:
            raise ConfigError(f"page_size must be >= 1, got {self.page_size}")

    @property
    def decode_weight_format(self) -> str:
        return self.decode_weights or self.weights


SHIPPED_MODEL_NAME = "verifier-tiny"


def default_model_path() -> Path:
    """The shipped model folder (reference_engine/models/verifier-tiny/)."""
    return Path(__file__).resolve().parent / "models" / SHIPPED_MODEL_NAME


def engine_config(model_path: str | Path | None = None, **options) -> EngineConfig:
    """The EngineConfig for a checkpoint folder (default: the shipped model, served as ``verifier-tiny``)."""
    path = Path(model_path) if model_path is not None else default_model_path()
    name = options.pop("served_model_name", None)
    if name is None:
        name = SHIPPED_MODEL_NAME if model_path is None else path.name
    return EngineConfig(model_path=path, served_model_name=name, **options)
