"""Build small random HF-format checkpoints (weights + byte-level BPE tokenizer + ChatML/Hermes chat template).

For tests and benchmarks that need a real checkpoint folder before (or besides) the shipped model: the result loads
through the same path as any Hugging Face checkpoint. Weights are random, so outputs are gibberish but deterministic.
Writes HF's tensor names and config keys with safetensors alone (no transformers import), so it ships with the
engine for its tests and benchmarks; only the parity tests load the result with transformers.
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


ASSISTANT_START = "@last:"   # in a chain: the last token of a rendered generation prompt (+ any text after the marker)


def build_scripted_checkpoint(out: str | Path, chains: list[list[str]], *, family: str = "qwen2") -> Path:
    """A checkpoint whose greedy output is scripted, for testing the serving path end to end (tool calls, stop
    strings, streaming) without a trained model.

    It is a real transformer that loads like any other, built as a bigram machine: one-hot embeddings, attention and
    MLP outputs zeroed (o_proj = down_proj = 0), and an lm_head that maps token i to its successor. Each chain
    [a, b, c, ...] makes a -> b -> c ...; every piece becomes a single (non-special) token; tokens without a successor
    go to <|im_end|>. `ASSISTANT_START + text` stands for the last token of the chat template's generation
    prompt followed by text (e.g. a forced tool-call prefix).
    """
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer

    from reference_engine.chat_template import render_chat

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out, 384)
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    pieces = sorted({p for chain in chains for p in chain if not p.startswith(ASSISTANT_START)})
    tok.add_tokens([p for p in pieces if tok.token_to_id(p) is None])
    tok.save(str(out / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    gen_prompt = render_chat(CHAT_TEMPLATE, [{"role": "user", "content": "x"}], add_generation_prompt=True)
    eos = tok.token_to_id("<|im_end|>")

    def tid(p: str) -> int:
        if p.startswith(ASSISTANT_START):
            return tok.encode(gen_prompt + p[len(ASSISTANT_START):], add_special_tokens=False).ids[-1]
        ids = tok.encode(p, add_special_tokens=False).ids
        if len(ids) != 1:
            raise ValueError(f"chain piece {p!r} is not a single token")
        return ids[0]

    nxt = {i: eos for i in range(vocab)}
    for chain in chains:
        for a, b in zip(chain, chain[1:]):
            nxt[tid(a)] = tid(b)
    hidden = ((vocab + 63) // 64) * 64
    heads, kv_heads, hd, inter = 4, 2, hidden // 4, 64
    arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}[family]
    config = {"architectures": [arch], "model_type": family, "vocab_size": vocab, "hidden_size": hidden,
              "intermediate_size": inter, "num_hidden_layers": 1, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "head_dim": hd, "max_position_embeddings": 1024,
              "tie_word_embeddings": False, "eos_token_id": eos, "bos_token_id": None, "rms_norm_eps": 1e-6,
              "hidden_act": "silu", "attention_bias": family == "qwen2", "rope_theta": 10000.0,
              "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "torch_dtype": "float32"}
    g = torch.Generator().manual_seed(0)
    embed = torch.zeros(vocab, hidden)
    embed[torch.arange(vocab), torch.arange(vocab)] = 1.0
    head = torch.zeros(vocab, hidden)
    for i, j in nxt.items():
        head[j, i] = 1.0
    p = "model.layers.0."
    t = {"model.embed_tokens.weight": embed, "lm_head.weight": head, "model.norm.weight": torch.ones(hidden),
         p + "self_attn.q_proj.weight": torch.randn(heads * hd, hidden, generator=g) * 0.05,
         p + "self_attn.k_proj.weight": torch.randn(kv_heads * hd, hidden, generator=g) * 0.05,
         p + "self_attn.v_proj.weight": torch.randn(kv_heads * hd, hidden, generator=g) * 0.05,
         p + "self_attn.o_proj.weight": torch.zeros(hidden, heads * hd),
         p + "mlp.gate_proj.weight": torch.randn(inter, hidden, generator=g) * 0.05,
         p + "mlp.up_proj.weight": torch.randn(inter, hidden, generator=g) * 0.05,
         p + "mlp.down_proj.weight": torch.zeros(hidden, inter),
         p + "input_layernorm.weight": torch.ones(hidden), p + "post_attention_layernorm.weight": torch.ones(hidden)}
    if family == "qwen2":
        for n, size in (("q", heads * hd), ("k", kv_heads * hd), ("v", kv_heads * hd)):
            t[p + f"self_attn.{n}_proj.bias"] = torch.zeros(size)
    if family == "qwen3":
        t[p + "self_attn.q_norm.weight"] = torch.ones(hd)
        t[p + "self_attn.k_norm.weight"] = torch.ones(hd)
    (out / "config.json").write_text(json.dumps(config, indent=1))
    save_file({k: v.contiguous() for k, v in t.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out
