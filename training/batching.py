"""Documents to training rows: tokenised documents with their loss masks (``Doc``), and rows of similar length
(``Batch``, ``bucket_batches``), shared-prefix groups as one row with a tree attention mask (``tree_mask``).

Split out of ``training.train`` so that the training loop reads as the loop; the data layout lives here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch
from tokenizers import Tokenizer

from training.chat_format import (
    CHAT_TEMPLATE,
    assistant_spans,
    call_name_and_key_spans,
)
from training.corpus import Conversation, ConversationGroup


@dataclass
class Doc:
    ids: np.ndarray   # int32 token ids
    mask: np.ndarray  # bool: token is an assistant output token (a training target)
    #: int16 per token: 0 for the shared prefix (or the whole of a plain document), i for the i-th of several
    #: continuations that each follow the prefix alone (a :class:`ConversationGroup`); None: plain document
    segments: np.ndarray | None = None
    #: uint8 per token (``SCHEMA_NAME``, ``SCHEMA_KEY``, ``NOT_A_TARGET`` or 0): a target inside a tool call's name
    #: or one of its argument keys (``call_name_and_key_spans``), or a token of an unsupervised assistant turn;
    #: None: not computed
    schema: np.ndarray | None = None


def encode(tok: Tokenizer, text: str) -> Doc:
    """Token ids plus the assistant-token mask, from character spans via the tokenizer's offsets."""
    return encode_all(tok, [text])[0]


def document_texts(items: list[Conversation | ConversationGroup],
                   template: str = CHAT_TEMPLATE) -> tuple[list[str], list[list[int]]]:
    """Each corpus item's training text (rendered by ``template``, default the ``system`` one), and where its
    continuations start (empty for a plain document)."""
    pairs = [item.text_and_starts(template) for item in items]
    return [text for text, _ in pairs], [starts for _, starts in pairs]


def tree_positions(segments: np.ndarray) -> np.ndarray:
    """The position each token would have in its own document: a continuation restarts where the prefix
    ends, so a model trained on shared-prefix rows sees exactly the positions it sees when serving."""
    positions = np.arange(len(segments), dtype=np.int64)
    prefix = int(np.sum(segments == 0))
    for seg in np.unique(segments[segments > 0]):
        where = np.flatnonzero(segments == seg)
        positions[where] = prefix + np.arange(len(where))
    return positions


def encode_all(tok: Tokenizer, texts: list[str], branch_starts: list[list[int]] | None = None,
               unsupervised: list[list[tuple[int, int]]] | None = None) -> list[Doc]:
    """:func:`encode` for a whole corpus: the tokenizer's batch call runs on every core, and the mask is
    one vectorised lookup per document (token start offset -> the assistant span it falls in, if any).
    ``unsupervised`` gives, per document, character spans of assistant turns that are no target of any kind
    (``Conversation.unsupervised_spans``: a slip shown as context); their tokens get the code ``NOT_A_TARGET``.

    Why it matters: corpus preparation comes out of the same wall-clock budget as training, so every second
    spent here is a second of training lost.
    """
    docs: list[Doc] = []
    for text, enc in zip(texts, tok.encode_batch(texts, add_special_tokens=False)):
        starts = np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(enc.offsets))
        mask = _inside_spans(starts, assistant_spans(text))
        skipped = _inside_spans(starts, unsupervised[len(docs)]) if unsupervised else None
        if skipped is not None:
            mask &= ~skipped
        name_spans, key_spans = call_name_and_key_spans(text)
        in_name = mask & _inside_spans(starts, name_spans)
        in_key = mask & _inside_spans(starts, key_spans)
        schema = (in_name * SCHEMA_NAME + in_key * SCHEMA_KEY).astype(np.uint8)
        if skipped is not None:
            schema[skipped] = NOT_A_TARGET
        branches = branch_starts[len(docs)] if branch_starts else []
        segments = np.searchsorted(np.asarray(branches, dtype=np.int64), starts, side="right").astype(np.int16) \
            if branches else None
        docs.append(Doc(np.asarray(enc.ids, dtype=np.int32), mask, segments, schema))
    return docs


#: the codes of ``Doc.schema``; NOT_A_TARGET marks a token of an unsupervised assistant turn, which is neither an
#: answer target nor a context target (``masked_loss``): the model must read a slip, never learn to make one
SCHEMA_NAME, SCHEMA_KEY, NOT_A_TARGET = 1, 2, 3


def _inside_spans(starts: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """Whether each token start offset lies inside one of the sorted, disjoint character ``spans``."""
    if not spans:
        return np.zeros(len(starts), bool)
    bounds = np.asarray(spans, dtype=np.int64)
    inside = np.searchsorted(bounds[:, 0], starts, side="right") - 1
    return (inside >= 0) & (starts < bounds[np.maximum(inside, 0), 1])


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


@dataclass
class Batch:
    """Right-padded rows of token ids, their target mask and, for shared-prefix rows, segments and positions."""

    ids: torch.Tensor       # [B, T] int64
    targets: torch.Tensor   # [B, T] bool: the token is a training target
    segments: torch.Tensor | None = None   # [B, T] int16 (see Doc.segments); None: every row is one document
    positions: torch.Tensor | None = None  # [B, T] int64 (see tree_positions)
    schema: torch.Tensor | None = None     # [B, T] uint8 (see Doc.schema); None when a document lacks it

    def to(self, device: str) -> Batch:
        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device)

        return Batch(self.ids.to(device), self.targets.to(device), move(self.segments), move(self.positions),
                     move(self.schema))


def tree_mask(segments: torch.Tensor) -> torch.Tensor:
    """[B, 1, T, T] attention mask of shared-prefix rows: causal, and a token of continuation i sees the
    prefix (segment 0) and continuation i only. Padding is segment 0 and sits after everything real, so no
    real token sees it, and a padding token still sees the prefix (a row with nothing to see gives NaN)."""
    t = segments.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool, device=segments.device).tril()
    same = segments[:, :, None] == segments[:, None, :]
    return (causal & (same | (segments[:, None, :] == 0)))[:, None]


def bucket_batches(docs: list[Doc], batch_tokens: int, pad_id: int, seed: int,
                   multiple: int = 8) -> list[Batch]:
    """One document per row, rows of similar length batched together, right-padded.

    Why not pack several documents into each row: attention over a packed row needs a block-diagonal mask,
    and PyTorch's CPU attention then does the work of the whole row length for every token; one document
    per row runs the plain causal kernel over the document's own length. Measured on the 2-core build
    machine with the shipped shape: 8.9k vs 5.9k tokens/s on synthetic batches (1.5x), 7.1k vs 5.4k over
    whole shipped training runs (1.3x). Sorting by length keeps padding small (about 1.5 %);
    the batch order is shuffled each epoch by the training loop. Padding sits after each document, so
    causal attention never reads it, and its target mask is false.

    A shared-prefix document (several continuations of one prefix, see ``tree_mask``) does need a mask, but
    it holds K requests in about a half of the tokens K separate documents take; such documents are
    batched among themselves, so plain batches keep the maskless kernel.
    """
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    order.sort(key=lambda i: (docs[i].segments is not None, len(docs[i].ids)))  # stable: ties stay shuffled
    groups: list[list[int]] = []
    width = 0
    for i in order:
        n = _round_up(len(docs[i].ids), multiple)
        if groups and (len(groups[-1]) + 1) * max(width, n) <= batch_tokens:
            groups[-1].append(i)
            width = max(width, n)
        else:
            groups.append([i])
            width = n
    out: list[Batch] = []
    for members in groups:
        width = _round_up(max(len(docs[i].ids) for i in members), multiple)
        ids = np.full((len(members), width), pad_id, dtype=np.int64)
        tmask = np.zeros((len(members), width), dtype=bool)
        for r, i in enumerate(members):
            n = len(docs[i].ids)
            ids[r, :n] = docs[i].ids
            tmask[r, :n] = docs[i].mask
        batch = Batch(torch.from_numpy(ids), torch.from_numpy(tmask))
        if all(docs[i].schema is not None for i in members):
            schema = np.zeros((len(members), width), dtype=np.uint8)
            for r, i in enumerate(members):
                doc_schema = docs[i].schema
                if doc_schema is not None:  # every one is (checked above)
                    schema[r, :len(docs[i].ids)] = doc_schema
            batch.schema = torch.from_numpy(schema)
        if any(docs[i].segments is not None for i in members):
            segments = np.zeros((len(members), width), dtype=np.int16)
            positions = np.tile(np.arange(width, dtype=np.int64), (len(members), 1))
            for r, i in enumerate(members):
                doc_segments = docs[i].segments
                if doc_segments is not None:
                    segments[r, :len(docs[i].ids)] = doc_segments
                    positions[r, :len(docs[i].ids)] = tree_positions(doc_segments)
            batch.segments, batch.positions = torch.from_numpy(segments), torch.from_numpy(positions)
        out.append(batch)
    return out
