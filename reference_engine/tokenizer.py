"""Tokenizer: `tokenizers` for the heavy lifting, plus what serving needs on top (special tokens from
tokenizer_config.json, stop ids, per-token display text and bytes for logprobs, incremental detokenisation)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer as HFTokenizer

from reference_engine.config import ConfigError


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode table (byte-level BPE shows bytes as printable characters)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _token_content(tok) -> str | None:
    if tok is None:
        return None
    if isinstance(tok, dict):
        return tok.get("content")
    return str(tok)


class Tokenizer:
    def __init__(self, model_dir: Path) -> None:
        model_dir = Path(model_dir)
        tok_file = model_dir / "tokenizer.json"
        if not tok_file.exists():
            raise ConfigError(f"{tok_file}: not found (the engine needs a tokenizers-format tokenizer.json)")
        self.tok = HFTokenizer.from_file(str(tok_file))
        cfg_file = model_dir / "tokenizer_config.json"
        self.config: dict = {}
        if cfg_file.exists():
            try:
                self.config = json.loads(cfg_file.read_text())
            except json.JSONDecodeError as e:
                raise ConfigError(f"{cfg_file}: line {e.lineno}: invalid JSON ({e.msg})") from None
        self.bos_token = _token_content(self.config.get("bos_token"))
        self.eos_token = _token_content(self.config.get("eos_token"))
        self.pad_token = _token_content(self.config.get("pad_token"))
        self.chat_template: str | None = self.config.get("chat_template")
        if isinstance(self.chat_template, list):   # [{"name": "default", "template": ...}, ...]
            by_name = {t.get("name"): t.get("template") for t in self.chat_template}
            self.chat_template = by_name.get("default") or next(iter(by_name.values()), None)
        if self.chat_template is None and (model_dir / "chat_template.jinja").exists():
            self.chat_template = (model_dir / "chat_template.jinja").read_text()
        decoder = json.loads(self.tok.to_str()).get("decoder") or {}
        self.byte_level = "ByteLevel" in json.dumps(decoder)
        self.special_ids = {i for i, t in self.tok.get_added_tokens_decoder().items() if t.special}
        self._bytes_cache: dict[int, bytes] = {}

    @property
    def vocab_size(self) -> int:
        return self.tok.get_vocab_size(with_added_tokens=True)

    def token_to_id(self, token: str | None) -> int | None:
        return None if token is None else self.tok.token_to_id(token)

    def eos_ids(self, model_eos: tuple[int, ...] = ()) -> set[int]:
        """Ids that end generation: the model config's eos ids, the tokenizer's eos, and the chat end-of-turn token."""
        ids = set(model_eos)
        for t in (self.eos_token, "<|im_end|>", "<|eot_id|>", "<|endoftext|>"):
            i = self.token_to_id(t)
            if i is not None and (t == self.eos_token or i in self.special_ids):
                ids.add(i)
        return ids

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        return self.tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], *, skip_special_tokens: bool = True) -> str:
        return self.tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes a token stands for (OpenAI's logprobs `bytes` field). Cached: top-20 logprobs ask a lot."""
        b = self._bytes_cache.get(token_id)
        if b is None:
            b = self._bytes_cache[token_id] = self._token_bytes(token_id)
        return b

    def _token_bytes(self, token_id: int) -> bytes:
        piece = self.tok.id_to_token(token_id)
        if piece is None:
            return b""
        if token_id in self.special_ids:
            return piece.encode()
        if self.byte_level:
            dec = _byte_decoder()
            if all(c in dec for c in piece):
                return bytes(dec[c] for c in piece)
        return self.tok.decode([token_id], skip_special_tokens=False).encode()

    def token_text(self, token_id: int) -> str:
        return self.token_bytes(token_id).decode("utf-8", errors="replace")


class IncrementalDecoder:
    """Turns a growing list of ids into text deltas, holding back an incomplete UTF-8 sequence."""

    def __init__(self, tokenizer: Tokenizer, *, skip_special_tokens: bool = True) -> None:
        self.tokenizer = tokenizer
        self.skip = skip_special_tokens
        self.ids: list[int] = []
        self.text = ""

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        full = self.tokenizer.decode(self.ids, skip_special_tokens=self.skip)
        if full.endswith("\ufffd"):
            return ""
        delta = full[len(self.text):] if full.startswith(self.text) else full
        self.text = full
        return delta

    def flush(self) -> str:
        full = self.tokenizer.decode(self.ids, skip_special_tokens=self.skip)
        delta = full[len(self.text):] if full.startswith(self.text) else ""
        self.text = full
        return delta
