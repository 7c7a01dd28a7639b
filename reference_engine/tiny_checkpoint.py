"""Build small random HF-format checkpoints (weights + byte-level BPE tokenizer + ChatML/Hermes chat template).

For tests and benchmarks that need a real checkpoint folder before (or besides) the shipped model: the result loads
through the same path as any Hugging Face checkpoint. Weights are random, so outputs are gibberish but deterministic.
Needs `transformers` (a test dependency) to write the weights the way HF does.
"""

from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions. Signatures:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\nReturn each call as <tool_call>{\"name\": <function-name>, \"arguments\": <args-json-object>}"
    "</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}"
    "{%- if not loop.first %}{{- raise_exception('a system message is only allowed first') }}{%- endif %}"
    "{%- elif message.role == 'user' %}{{- '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if message.content %}{{- message.content }}{%- endif %}"
    "{%- for tc in message.tool_calls or [] %}"
    "{{- '<tool_call>{\"name\": \"' + tc.function.name + '\", \"arguments\": ' + (tc.function.arguments | tojson)"
    " + '}</tool_call>' }}"
    "{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}{{- raise_exception('unknown role ' + message.role) }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TOKENS = ["<tool_call>", "</tool_call>"]    # added but not special, as in Qwen: they must survive decoding

_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}',
    "user assistant system tool call response function arguments name",
    "def add(a, b):\n    return a + b\n",
    "Hello! How can I help you today? 0123456789 {}[]:,\"",
]


def build_tokenizer(out: Path, vocab_size: int = 512) -> int:
    """Train a byte-level BPE on a tiny corpus; returns the real vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_CORPUS * 20, trainer)
    tok.add_tokens(TOOL_TOKENS)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": CHAT_TEMPLATE,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "model_max_length": 4096,
    }, indent=1))
    return tok.get_vocab_size()


def build_checkpoint(out: str | Path, family: str = "llama", *, hidden: int = 64, layers: int = 2, heads: int = 4,
                     kv_heads: int = 2, intermediate: int = 128, head_dim: int | None = None, vocab: int = 512,
                     max_pos: int = 2048, tie: bool = False, rope_theta: float = 10000.0,
                     rope_scaling: dict | None = None, seed: int = 0, std: float = 0.08) -> Path:
    """Write a random `family` (llama | qwen2 | qwen3) checkpoint with our tokenizer into `out`.

    Written directly with safetensors in Hugging Face's tensor names and config.json keys (no transformers import,
    which costs ~10 s), so transformers' `from_pretrained` loads it too: that is what the parity tests rely on.
    Weights are N(0, std) (wider than HF's 0.02 init so logits are not near-uniform), norms around 1.
    """
    import torch
    from safetensors.torch import save_file

    arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
    if family not in arch:
        raise ValueError(f"unknown family {family!r} (llama, qwen2, qwen3)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    real_vocab = build_tokenizer(out, vocab)
    tok = json.loads((out / "tokenizer.json").read_text())
    eos = next(t["id"] for t in tok["added_tokens"] if t["content"] == "<|im_end|>")
    hd = head_dim or hidden // heads
    rope = {"rope_theta": rope_theta, "rope_type": "default"}
    if rope_scaling:
        rope = {**rope_scaling, "rope_theta": rope_theta}
    config = {
        "architectures": [arch[family]], "model_type": family, "vocab_size": real_vocab, "hidden_size": hidden,
        "intermediate_size": intermediate, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": hd, "max_position_embeddings": max_pos,
        "tie_word_embeddings": tie, "eos_token_id": eos, "bos_token_id": None, "rms_norm_eps": 1e-6,
        "hidden_act": "silu", "attention_bias": family == "qwen2", "rope_theta": rope_theta,
        "rope_scaling": rope_scaling, "rope_parameters": rope, "torch_dtype": "float32", "dtype": "float32",
        "use_sliding_window": False, "sliding_window": None,
    }
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * std

    def norm(n: int) -> torch.Tensor:
        return 0.8 + 0.4 * torch.rand(n, generator=g)

    t: dict[str, torch.Tensor] = {"model.embed_tokens.weight": rnd(real_vocab, hidden) * 10,
                                  "model.norm.weight": norm(hidden)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = rnd(heads * hd, hidden)
        t[p + "self_attn.k_proj.weight"] = rnd(kv_heads * hd, hidden)
        t[p + "self_attn.v_proj.weight"] = rnd(kv_heads * hd, hidden)
        t[p + "self_attn.o_proj.weight"] = rnd(hidden, heads * hd)
        if family == "qwen2":
            t[p + "self_attn.q_proj.bias"] = rnd(heads * hd) * 2
            t[p + "self_attn.k_proj.bias"] = rnd(kv_heads * hd) * 2
            t[p + "self_attn.v_proj.bias"] = rnd(kv_heads * hd) * 2
        if family == "qwen3":
            t[p + "self_attn.q_norm.weight"] = norm(hd)
            t[p + "self_attn.k_norm.weight"] = norm(hd)
        t[p + "mlp.gate_proj.weight"] = rnd(intermediate, hidden)
        t[p + "mlp.up_proj.weight"] = rnd(intermediate, hidden)
        t[p + "mlp.down_proj.weight"] = rnd(hidden, intermediate)
        t[p + "input_layernorm.weight"] = norm(hidden)
        t[p + "post_attention_layernorm.weight"] = norm(hidden)
    if not tie:
        t["lm_head.weight"] = rnd(real_vocab, hidden)
    (out / "config.json").write_text(json.dumps(config, indent=1))
    save_file({k: v.contiguous() for k, v in t.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out
