"""Write a trained model as a standard Hugging Face checkpoint folder.

Files: ``config.json`` (LlamaForCausalLM), ``model.safetensors`` (bf16: the precision the engine serves
as its reference), ``tokenizer.json``, ``tokenizer_config.json`` (with the jinja2 chat template),
``generation_config.json``. Nothing here is specific to the reference engine: ``transformers`` loads the
folder too.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

from training.chat_format import CHAT_TEMPLATE, IM_END, MARKER_TOKENS, PAD_TOKEN, SPECIAL_TOKENS
from training.model import TinyLlama

MAX_CHECKPOINT_BYTES = 20 * 1024 * 1024


def token_ids(tok: Tokenizer) -> dict[str, int]:
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS + MARKER_TOKENS}
    missing = [t for t, i in ids.items() if i is None]
    if missing:
        raise RuntimeError(f"tokenizer lacks tokens {missing}")
    return ids  # type: ignore[return-value]


def tokenizer_config(tok: Tokenizer, model_max_length: int, chat_template: str = CHAT_TEMPLATE) -> dict:
    ids = token_ids(tok)
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": chat_template,
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": PAD_TOKEN,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
        "added_tokens_decoder": {
            str(i): {"content": t, "lstrip": False, "rstrip": False, "normalized": False, "single_word": False,
                     "special": t in SPECIAL_TOKENS}
            for t, i in sorted(ids.items(), key=lambda kv: kv[1])
        },
    }


def export_checkpoint(model: TinyLlama, tok: Tokenizer, out_dir: Path, *, metadata: dict[str, str] | None = None,
                      chat_template: str = CHAT_TEMPLATE) -> Path:
    """Write the checkpoint folder, with the chat template the model was trained on; raises if
    model.safetensors would exceed the 20 MB budget."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ids = token_ids(tok)
    eos, pad = ids[IM_END], ids[PAD_TOKEN]
    state = {k: v.detach().to(device="cpu", dtype=torch.bfloat16).contiguous()
             for k, v in model.state_dict().items()}
    size = sum(v.numel() * v.element_size() for v in state.values())
    if size > MAX_CHECKPOINT_BYTES:
        raise RuntimeError(f"checkpoint would be {size / 1e6:.1f} MB > 20 MB budget")
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt", **(metadata or {})})
    cfg = model.cfg.to_hf(eos_token_id=eos, pad_token_id=pad, bos_token_id=None)
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    tok.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(tok, model.cfg.max_position_embeddings, chat_template), indent=2) + "\n")
    gen = {"eos_token_id": [eos, pad], "pad_token_id": pad, "do_sample": False, "max_new_tokens": 256}
    (out_dir / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    return out_dir
