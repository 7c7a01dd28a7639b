"""Train verifier-tiny's byte-level BPE tokenizer on the training corpus.

Byte-level so any Unicode input round-trips (no unknown token); a small vocabulary (2048 including
special tokens) because the model is tiny and its embedding/unembedding matrices would otherwise
dominate its parameter count. Control tokens (<|im_start|>, <|im_end|>, <|endoftext|>) are *special*
(hidden when decoding); the tool-call / tool-response markers are added tokens that are *not* special,
so they survive ``decode(skip_special_tokens=True)`` and the engine's parser sees them.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from training.chat_format import MARKER_TOKENS, SPECIAL_TOKENS

VOCAB_SIZE = 2048


def train_tokenizer(texts: Iterable[str], vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """A byte-level BPE over ``texts``; total vocabulary (merges + specials + markers) <= ``vocab_size``."""
    tok = Tokenizer(models.BPE())
    # digits one token each: the model copies ids and amounts from the request and from tool results, and
    # copying is one induction step per token only when a number's tokenization does not depend on context
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(MARKER_TOKENS),
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # strip the markers out of the training text so BPE does not spend merges on their pieces
    cleaned = (_strip_markers(t) for t in texts)
    tok.train_from_iterator(cleaned, trainer=trainer)
    tok.add_tokens([AddedToken(m, special=False, normalized=False) for m in MARKER_TOKENS])
    return tok  # a small corpus may yield fewer merges; the model's vocab is padded to a multiple of 64


def _strip_markers(text: str) -> str:
    for m in SPECIAL_TOKENS + MARKER_TOKENS:
        text = text.replace(m, " ")
    return text
