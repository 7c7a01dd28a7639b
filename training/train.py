"""Train verifier-tiny from scratch on CPU and export it as an HF checkpoint.

    python -m training.train --out reference_engine/models/verifier-tiny

Steps: generate the synthetic corpus (training templates/seeds only) -> train the byte-level BPE tokenizer
-> tokenize with a loss mask on assistant tokens -> batch documents of similar length, one per row
(``bucket_batches`` says why not packed; with ``--group-size`` K a row holds a shared system prompt and tool
list followed by K requests and answers, each seeing only the prefix and itself) -> Muon on the decoder
matrices and AdamW on the rest (``training.optim``; ``--optimizer adamw`` for AdamW alone) with warmup + cosine decay
(or
``--schedule wsd``), fixed seed, 2 threads -> export a running average of the weights (``--ema-decay``) as bf16
safetensors. Progress goes to stdout (run it under
``nohup ... > train.log``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from tokenizers import Tokenizer
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from training.augment import RENAME_STYLES
from training.chat_format import (
    CHAT_TEMPLATE,
    TOOL_CALL_OPEN,
    TOOL_LIST_PLACES,
    assistant_spans,
    call_name_and_key_spans,
    chat_template,
)
from training.corpus import AGENT_HORIZONS, Conversation, ConversationGroup, build_corpus, dump_jsonl
from training.export import export_checkpoint
from training.model import TinyConfig, TinyLlama
from training.optim import NS_DTYPES, OPTIMIZERS, bfloat16_matmul_is_fast, build_optimizers
from training.tokenizer_train import train_tokenizer


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
    docs = []
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
                schema[r, :len(docs[i].ids)] = docs[i].schema
            batch.schema = torch.from_numpy(schema)
        if any(docs[i].segments is not None for i in members):
            segments = np.zeros((len(members), width), dtype=np.int16)
            positions = np.tile(np.arange(width, dtype=np.int64), (len(members), 1))
            for r, i in enumerate(members):
                if docs[i].segments is not None:
                    segments[r, :len(docs[i].ids)] = docs[i].segments
                    positions[r, :len(docs[i].ids)] = tree_positions(docs[i].segments)
            batch.segments, batch.positions = torch.from_numpy(segments), torch.from_numpy(positions)
        out.append(batch)
    return out


#: learning-rate schedules after warmup; ``wsd`` (warmup-stable-decay) holds the peak and decays linearly to
#: zero over the last ``WSD_DECAY`` of the run, which suits a run whose length the time budget decides
SCHEDULES = ("cosine", "wsd")
WSD_DECAY = 0.25


def lr_at(progress: float, step: int, peak: float, warmup: int, schedule: str = "cosine") -> float:
    """Linear warmup over ``warmup`` steps, then ``schedule`` as ``progress`` goes 0 -> 1: cosine decay to 10%
    of peak, or (wsd) the peak until the last quarter and a linear decay to zero over it."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, max(0.0, progress))
    if schedule == "wsd":
        return peak * min(1.0, (1.0 - progress) / WSD_DECAY)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


#: the shipped checkpoint, whose safetensors metadata records how many steps its run took
SHIPPED_CHECKPOINT = (Path(__file__).resolve().parents[1] / "reference_engine" / "models" / "verifier-tiny"
                      / "model.safetensors")
#: a retrain projected below this share of the shipped run's steps gets a warning (see ``pace_warning``)
PACE_TOLERANCE = 0.85
#: steps at which the pace is reported (the tokens/s of the first minutes run a little below the final ones)
PACE_CHECKS = (1000, 2000, 4000, 8000)


@dataclass(frozen=True)
class RecordedRun:
    """What a finished training run wrote into its checkpoint's metadata: enough to tell whether another
    run's step count can be compared with it (a step of a different batch size, grouping or optimizer is not:
    a Muon step costs more time than an AdamW step and does more)."""

    steps: int
    batch_tokens: int
    group_size: int
    optimizer: str = "adamw"


def recorded_run(checkpoint: Path) -> RecordedRun | None:
    """The run recorded in a finished checkpoint (None when unknown). Checkpoints from before the batch
    size, grouping and optimizer were recorded used the then only recipe: 1,536-token batches, no groups,
    AdamW."""
    try:
        with safe_open(str(checkpoint), "pt") as f:
            meta = f.metadata() or {}
    except (OSError, SafetensorError):
        return None
    if meta.get("final") != "true" or not str(meta.get("step", "")).isdigit():
        return None
    return RecordedRun(int(meta["step"]), int(meta.get("batch_tokens", 1536)), int(meta.get("group_size", 1)),
                       meta.get("optimizer", "adamw"))


def projected_steps(step: int, elapsed_s: float, budget_s: float, total: int) -> int:
    """The step at which the time budget will end the schedule, if the pace so far holds."""
    if elapsed_s <= 0:
        return total
    return min(total, int(step * budget_s / elapsed_s))


def pace_warning(projected: int, reference: int | None, tolerance: float = PACE_TOLERANCE) -> str | None:
    """A warning when the budget will stop this run well short of the shipped run's step count.

    Why: the budget is wall-clock time, so a slower or busier machine trains fewer steps, and at this size
    the steps decide: the shipped recipe rerun with 73 % of its steps fell from 105 to 41 correct held-out
    cases (training/JOURNAL.md, "Retrains of 2026-12-03"). Such a retrain says little about the recipe and should not
    replace the model.
    """
    if reference is None or projected >= tolerance * reference:
        return None
    return (f"WARNING: at this pace the time budget ends the schedule near step {projected}, "
            f"{projected / reference:.0%} of the shipped run's {reference}; this machine is too slow or busy "
            f"for the result to be compared with the shipped checkpoint (see MODEL_CARD.md, Retraining)")


def masked_loss(model: TinyLlama, batch: Batch, decision_weight: float = 1.0,
                text_decision_weight: float | None = None, call_token_id: int | None = None,
                schema_weight: float = 1.0, schema_names_only: bool = False, context_weight: float = 0.0,
                context_share: float = 1.0, pad_id: int | None = None) -> torch.Tensor:
    """Next-token loss where the *target* is an assistant token.

    ``decision_weight`` weighs the first token of each assistant turn, the one that decides between a tool
    call and a text answer, that many times an ordinary target (a weighted mean). Why: that one token is
    all that refusing a request for a tool that is not offered takes, and among some forty targets per
    answer its gradient is small; every run so far calls a tool for almost all such requests.
    ``text_decision_weight`` (with ``call_token_id``, the id of ``<tool_call>``) gives a first token that starts a
    text answer instead its own weight: above ``decision_weight`` it moves the model's doubtful decisions towards
    answering in text. Why: an unwanted call almost always fails the schema check (it names a tool that is not
    offered), a missed call does not, and every run so far makes more unwanted calls than missed ones.
    ``schema_weight`` weighs the targets of a tool call's name and argument keys (``Batch.schema``). Why: a
    call's schema validity rests on those few tokens (a name from the offered list, that tool's parameter names),
    and most schema failures of the shipped runs are names of tools that are not offered or unknown keys.
    ``schema_names_only`` weighs the names alone: the keys are a quarter of all targets, and weighing them too
    takes a large share of the loss from the argument values (training/JOURNAL.md, "ninth session").
    ``context_weight`` adds the other tokens (system prompt, tool list, requests, tool results, turn headers; not
    the padding, which ``pad_id`` names) as targets of that weight, a random ``context_share`` of them at each
    step. Why: the model is trained from scratch, and predicting its context is four times as many targets per
    step as the answers alone, for the cost of the LM head on the extra positions: tool names recur in the lists,
    and ids and names recur from calls into tool results, so the context also teaches reading and copying.
    In a shared-prefix row the token after a continuation's last one is the next continuation's
    ``<|im_start|>``, never a target, so no loss crosses from one continuation into another (context targets
    are refused there for that reason).
    """
    ids = batch.ids
    if batch.segments is None:
        hidden = model(ids[:, :-1], hidden_only=True)
    else:
        hidden = model(ids[:, :-1], positions=batch.positions[:, :-1],
                       attn_mask=tree_mask(batch.segments[:, :-1]), hidden_only=True)
    answer = batch.targets[:, 1:]
    keep = answer
    context = None
    if context_weight > 0:
        if batch.segments is not None or pad_id is None:
            raise ValueError("context_weight needs pad_id and one document per row (no shared-prefix groups)")
        context = (ids[:, 1:] != pad_id) & ~answer
        if batch.schema is not None:
            context &= batch.schema[:, 1:] != NOT_A_TARGET
        if context_share < 1.0:
            context &= torch.rand(context.shape, device=ids.device) < context_share
        keep = answer | context
    targets = ids[:, 1:][keep]
    logits = model.lm_head(hidden[keep])
    if text_decision_weight is None:
        text_decision_weight = decision_weight
    if decision_weight == 1.0 and text_decision_weight == 1.0 and schema_weight == 1.0 and context is None:
        return F.cross_entropy(logits, targets)
    losses = F.cross_entropy(logits, targets, reduction="none")
    first = (answer & ~batch.targets[:, :-1])[keep]  # an answer target whose predecessor is not one
    first_weight: torch.Tensor | float = decision_weight
    if text_decision_weight != decision_weight:
        if call_token_id is None:
            raise ValueError("text_decision_weight needs call_token_id")
        first_weight = torch.where(targets == call_token_id, decision_weight, text_decision_weight).to(losses.dtype)
    other_weight: torch.Tensor | float = 1.0
    if schema_weight != 1.0:
        if batch.schema is None:
            raise ValueError("schema_weight needs the batch's schema mask (documents encoded by encode_all)")
        codes = batch.schema[:, 1:][keep]
        marked = codes == SCHEMA_NAME if schema_names_only else (codes == SCHEMA_NAME) | (codes == SCHEMA_KEY)
        other_weight = torch.where(marked, schema_weight, 1.0).to(losses.dtype)
    weights = torch.where(first, first_weight, other_weight)
    if context is not None:
        weights = torch.where(context[keep], context_weight, weights)
    return (losses * weights).sum() / weights.sum()


def recipe_loss(model: TinyLlama, batch: Batch, args: argparse.Namespace, call_token_id: int,
                pad_id: int) -> torch.Tensor:
    """``masked_loss`` with the run's weighting options (the training loop's and ``benchmarks/train_step.py``'s)."""
    return masked_loss(model, batch, args.decision_weight, args.text_decision_weight, call_token_id,
                       args.schema_weight, args.schema_names_only, args.context_weight, args.context_share, pad_id)


def apply_update(model: TinyLlama, loss: torch.Tensor, optimizers: list[torch.optim.Optimizer],
                 averages: list[AveragedModel]) -> None:
    """One step's update from ``loss``: gradients clipped to norm 1, every optimizer stepped, every running
    average of the weights updated."""
    for opt in optimizers:
        opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    for opt in optimizers:
        opt.step()
    for average in averages:
        average.update_parameters(model)


def model_config(args: argparse.Namespace, vocab: int) -> TinyConfig:
    """The decoder's shape from the command line (the defaults are the shipped checkpoint's)."""
    return TinyConfig(vocab_size=vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, max_position_embeddings=args.block)


def corpus_data(args: argparse.Namespace, t0: float) -> tuple[Tokenizer, list[Doc]]:
    """Generate the corpus, train the tokenizer on it and encode every conversation."""
    convs = build_corpus(args.n_toolcall, args.n_agent, args.seed, args.group_size, args.contrast_share,
                         args.wide_small_talk, args.rename_style, args.agent_horizons, args.agent_slip_share)
    sources: dict[str, int] = {}
    for c in convs:
        key = c.source.split(":")[0]
        sources[key] = sources.get(key, 0) + 1
    print(f"corpus: {len(convs)} conversations {sources} ({time.time() - t0:.0f}s)", flush=True)
    if "standin" in sources and not args.allow_standin:
        raise SystemExit("suites.toolcall.catalog is not importable: refusing to train on the stand-in catalogue "
                         "(pass --allow-standin for a pipeline test)")
    if args.dump_corpus:
        dump_jsonl(convs, str(args.dump_corpus))

    texts, branch_starts = document_texts(convs, chat_template(args.tool_list_at))
    tok = train_tokenizer(texts)
    docs = encode_all(tok, texts, branch_starts, [c.unsupervised_spans(t) for c, t in zip(convs, texts)])
    return tok, docs


#: the file in a ``--prepared`` directory that records which corpus it holds (present once it is complete)
PREPARED_RECORD = "corpus.json"


def prepared_data(args: argparse.Namespace) -> tuple[Tokenizer, list[Doc]]:
    """The tokenizer and encoded documents from ``--prepared DIR``, made there first when it is empty.

    Why: a recipe sweep (``training/sweep.py``) runs many trainings on one corpus; preparing it once saves
    each run the corpus and tokenizer minutes. The corpus arguments are recorded and must match.
    """
    key = {"n_toolcall": args.n_toolcall, "n_agent": args.n_agent, "seed": args.seed}
    if args.group_size > 1:
        key["group_size"] = args.group_size
    if args.contrast_share:
        key["contrast_share"] = args.contrast_share
    if args.wide_small_talk:
        key["wide_small_talk"] = True
    if args.agent_horizons != AGENT_HORIZONS:
        key["agent_horizons"] = list(args.agent_horizons)
    if args.tool_list_at != "system":
        key["tool_list_at"] = args.tool_list_at
    if args.agent_slip_share:
        key["agent_slip_share"] = args.agent_slip_share
    meta_path = args.prepared / PREPARED_RECORD
    if not meta_path.exists():
        tok, docs = corpus_data(args, time.time())
        args.prepared.mkdir(parents=True, exist_ok=True)
        tok.save(str(args.prepared / "tokenizer.json"))
        lengths = np.array([len(d.ids) for d in docs], dtype=np.int64)
        ids = np.concatenate([d.ids for d in docs])
        # uint16 holds any id of a vocabulary under 65,536 and halves the file a sweep carries to a GPU machine
        # segment -1 marks a plain document's tokens (Doc.segments None)
        segments = np.concatenate([np.full(len(d.ids), -1, np.int16) if d.segments is None else d.segments
                                   for d in docs])
        np.savez_compressed(args.prepared / "docs.npz", lengths=lengths,
                            ids=ids.astype(np.uint16) if tok.get_vocab_size() < 2**16 else ids,
                            mask=np.concatenate([d.mask for d in docs]), segments=segments,
                            schema=np.concatenate([d.schema for d in docs]))
        meta_path.write_text(json.dumps(key))
        return tok, docs
    recorded = json.loads(meta_path.read_text())
    if recorded != key:
        raise SystemExit(f"{meta_path}: prepared for {recorded}, not for this run's {key}")
    tok = Tokenizer.from_file(str(args.prepared / "tokenizer.json"))
    with np.load(args.prepared / "docs.npz") as z:
        bounds = np.cumsum(z["lengths"])[:-1]
        ids = z["ids"].astype(np.int32)
        segments = z["segments"] if "segments" in z.files else np.full(len(ids), -1, np.int16)
        # a corpus prepared before schema masks were stored has none: fine unless --schema-weight asks for them
        schemas = np.split(z["schema"], bounds) if "schema" in z.files else [None] * (len(bounds) + 1)
        if schemas[0] is None and args.schema_weight != 1.0:
            raise SystemExit(f"{args.prepared}: prepared without schema masks, which --schema-weight needs; "
                             "prepare it again in an empty folder")
        docs = [Doc(i, m, None if len(g) and g[0] < 0 else g, sm)
                for i, m, g, sm in zip(np.split(ids, bounds), np.split(z["mask"], bounds),
                                       np.split(segments, bounds), schemas)]
    print(f"prepared corpus from {args.prepared}: {len(docs)} documents", flush=True)
    return tok, docs


#: options recorded in the final checkpoint's metadata: together with the corpus seed they say which recipe made
#: it, and a test checks that ``build_parser()``'s defaults still equal the shipped checkpoint's values
RECIPE_OPTIONS = ("seed", "init_seed", "n_toolcall", "n_agent", "block", "epochs", "lr", "warmup", "optimizer",
                  "batch_tokens", "group_size", "decision_weight", "text_decision_weight", "contrast_share",
                  "wide_small_talk", "time_limit_min", "schedule", "layers", "hidden", "heads", "kv_heads",
                  "intermediate", "ema_decay", "rename_style", "agent_horizons", "schema_weight",
                  "schema_names_only", "tool_list_at", "muon_ns_dtype", "context_weight", "context_share",
                  "agent_slip_share")


def _parse_fraction(text: str, zero_allowed: bool, one_allowed: bool) -> float:
    """``text`` as a number in the interval the two flags describe; argparse reports the error as one line naming
    the option."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    above_zero = value >= 0.0 if zero_allowed else value > 0.0
    below_one = value <= 1.0 if one_allowed else value < 1.0
    if not (above_zero and below_one):
        interval = f"{'[' if zero_allowed else '('}0, 1{']' if one_allowed else ')'}"
        raise argparse.ArgumentTypeError(f"share {text} is not a number in {interval}")
    return value


def parse_share(text: str) -> float:
    """A share in (0, 1] (``--context-share``)."""
    return _parse_fraction(text, zero_allowed=False, one_allowed=True)


def parse_slip_share(text: str) -> float:
    """A share in [0, 1) for ``--agent-slip-share`` (0: no slips)."""
    return _parse_fraction(text, zero_allowed=True, one_allowed=False)


def parse_horizons(text: str) -> tuple[int, ...]:
    """``--agent-horizons`` as a tuple of positive integers; argparse reports the ValueError as a one-line error."""
    try:
        horizons = tuple(int(h) for h in text.split(","))
    except ValueError:
        horizons = ()
    if not horizons or min(horizons) < 1:
        raise argparse.ArgumentTypeError(f"want comma-separated positive integers such as 4,6,25, not {text!r}")
    return horizons


def parse_also_ema(spec: str) -> tuple[float, Path]:
    """``DECAY=DIR`` of ``--also-ema`` as (decay, folder); ValueError naming the option if malformed."""
    decay_text, sep, out_dir = spec.partition("=")
    try:
        decay = float(decay_text)
    except ValueError:
        decay = -1.0
    if not sep or not out_dir or not 0.0 < decay < 1.0:
        raise ValueError(f"--also-ema wants DECAY=DIR with DECAY in (0, 1), not {spec!r}")
    return decay, Path(out_dir)


def recipe_metadata(args: argparse.Namespace) -> dict[str, str]:
    """The recipe options of ``args`` as safetensors metadata (strings)."""
    def text(value: object) -> str:
        return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)

    return {name: text(getattr(args, name)) for name in RECIPE_OPTIONS}


def build_parser() -> argparse.ArgumentParser:
    """The command line; its defaults are the shipped checkpoint's recipe."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("reference_engine/models/verifier-tiny"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--init-seed", type=int, default=7,
                    help="seed of the weights and batch order alone (default 7, the shipped run's; the corpus "
                         "comes from --seed), so two values measure run-to-run noise")
    ap.add_argument("--n-toolcall", type=int, default=72000)
    ap.add_argument("--n-agent", type=int, default=10800,
                    help="agent trajectories (default 10,800: with Muon, 7,200 left the files and tickets tasks "
                         "unsolved and 14,400 cost the tool calls; training/JOURNAL.md)")
    ap.add_argument("--group-size", type=int, default=1,
                    help="tool-call requests per shared system prompt and tool list (1: each its own document); "
                         "K > 1 trains K requests on one prefix computed once, in shared-prefix rows")
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--batch-tokens", type=int, default=1536, help="tokens per batch (rows x row length)")
    ap.add_argument("--epochs", type=float, default=1.2)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--optimizer", choices=OPTIMIZERS, default="muon",
                    help="muon (the shipped recipe since v6): Muon (training.optim.BatchedMuon) on the decoder "
                         "layers' matrices, AdamW on the rest, one learning rate; adamw: AdamW on everything (v5)")
    ap.add_argument("--muon-ns-dtype", choices=tuple(NS_DTYPES), default="bfloat16",
                    help="precision of Muon's Newton-Schulz iteration: bfloat16 (v10's recipe, as torch.optim.Muon; a "
                         "little faster on a CPU with bfloat16 matrix units) or float32 (v6 to v9)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--time-limit-min", type=float, default=44.0,
                    help="wall-clock budget for the whole script; the LR schedule compresses to fit it")
    ap.add_argument("--steps", type=int, default=None,
                    help="schedule this many steps instead of --epochs (the time budget still ends it early): "
                         "replays a CPU run's step count on a faster machine, to compare recipes at the same "
                         "cost (see training/sweep.py)")
    ap.add_argument("--schedule", choices=SCHEDULES, default="cosine")
    ap.add_argument("--decision-weight", type=float, default=7.5,
                    help="loss weight of each assistant turn's first token (call or text?) against 1 for the rest; "
                         "with --text-decision-weight, the weight of a first token that opens a tool call (default "
                         "7.5, v10's: v9's 5 raised by half, as the context targets add about half to the weights)")
    ap.add_argument("--text-decision-weight", type=float, default=22.5,
                    help="loss weight of an assistant turn's first token when it starts a text answer rather than "
                         "<tool_call> (default 22.5, v10's: three times --decision-weight, which leans doubtful "
                         "decisions to refusing; 15 for v9, 10 for v7's and v8's recipe, the --decision-weight value "
                         "for v6's)")
    ap.add_argument("--schema-weight", type=float, default=3.0,
                    help="loss weight of a tool call's name (and, without --schema-names-only, argument-key) tokens "
                         "(default 3, v10's; 1 weighs them like any other target, as v9 and earlier did)")
    ap.add_argument("--schema-names-only", action=argparse.BooleanOptionalAction, default=True,
                    help="--schema-weight weighs the call's name tokens alone, not the argument keys (default, v10's)")
    ap.add_argument("--context-weight", type=float, default=0.3,
                    help="loss weight of the context's tokens (prompt, tool list, requests, tool results) as targets "
                         "(default 0.3, v10's; 0 trains on the answers alone, as v9 and earlier did; see masked_loss)")
    ap.add_argument("--context-share", type=parse_share, default=0.5,
                    help="share of the context's tokens drawn as targets at each step (0 < share <= 1; default 0.5, "
                         "v10's): the LM head on every context position costs about a tenth of a step")
    ap.add_argument("--contrast-share", type=float, default=0.3,
                    help="share of tool requests that also come as a twin with the needed tool withheld and a "
                         "refusal for answer (so only the tool list tells calling from refusing)")
    ap.add_argument("--agent-horizons", type=parse_horizons, default=AGENT_HORIZONS, metavar="H,H,...",
                    help="horizons the agent trajectories are drawn at, each cut to its latest 14 calls (default "
                         "4,6,8,10,12,14, the shipped recipe's). Longer ones show the longer tool results of long "
                         "tasks (a notes list of 10 words at 50) in documents of the same length; training/JOURNAL.md, "
                         "eighth session")
    ap.add_argument("--agent-slip-share", type=parse_slip_share, default=0.3,
                    help="share of agent trajectories that show one refused slip (a miscopied name or key) as "
                         "context, then the right call as target, to teach recovery from an error (0 <= share < 1; "
                         "default 0.3, v11's; 0: oracle trajectories only, as v10 and earlier; "
                         "training.corpus.agent_conversations)")
    ap.add_argument("--tool-list-at", choices=TOOL_LIST_PLACES, default="system",
                    help="where the chat template renders the offered tools: in the system turn, or after the first "
                         "user message (training.chat_format.TOOL_LIST_PLACES says why); the checkpoint ships the "
                         "template it was trained with")
    ap.add_argument("--wide-small-talk", action="store_true",
                    help="generate small talk of eleven kinds instead of five (see training.augment.small_talk)")
    ap.add_argument("--rename-style", choices=RENAME_STYLES, default="variants",
                    help="how the 40 %% of tool lists that are renamed get their names: variants (v7's and v8's: "
                         "plausible aliases such as lookup_forecast, which a long run learns as names of the tool) or "
                         "arbitrary (unrelated words drawn per case, so a name can only be copied from the list)")
    ap.add_argument("--ema-decay", type=float, default=0.9995,
                    help="export an exponential moving average of the weights with this decay per step instead of "
                         "the last step's weights (default 0.9995, v11's: roughly the last two thousand steps; 0.998 "
                         "for v10, 0.999 for v7 to v9; 0: off, v6's recipe)")
    ap.add_argument("--raw-out", type=Path, default=None,
                    help="with --ema-decay, also write the last step's own weights here, to compare the two")
    ap.add_argument("--also-ema", action="append", default=[], metavar="DECAY=DIR",
                    help="also keep an average with this decay and write it to DIR (repeatable): one run then "
                         "gives several exports, to choose among on validation cases (training.select)")
    ap.add_argument("--prepared", type=Path, default=None,
                    help="directory caching the encoded corpus across runs (made on first use; for sweeps)")
    ap.add_argument("--prepare-only", action="store_true", help="fill --prepared and stop")
    ap.add_argument("--device", default="cpu", help="torch device; the shipped recipe is CPU")
    ap.add_argument("--allow-standin", action="store_true", help="permit training on the stand-in catalogue")
    ap.add_argument("--dump-corpus", type=Path, default=None)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=384)
    return ap


def main(argv: list[str] | None = None) -> None:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.prepare_only and not args.prepared:
        ap.error("--prepare-only needs --prepared DIR")
    if args.context_weight < 0:
        ap.error(f"--context-weight must be 0 or more, not {args.context_weight}")
    if args.context_weight and args.group_size > 1:
        ap.error("--context-weight needs one document per row; it cannot be combined with --group-size > 1")
    if not 0.0 <= args.contrast_share <= 1.0:
        ap.error(f"--contrast-share must be between 0 and 1, not {args.contrast_share}")
    if args.contrast_share and args.group_size > 1:
        ap.error("--contrast-share works on single requests; it cannot be combined with --group-size > 1 "
                 "(pass --contrast-share 0 with groups)")
    if not 0.0 <= args.ema_decay < 1.0:
        ap.error(f"--ema-decay must be in [0, 1), not {args.ema_decay}")
    if args.raw_out and not args.ema_decay:
        ap.error("--raw-out writes the last step's weights beside the average; it needs --ema-decay above 0")
    try:
        args.also_ema = [parse_also_ema(spec) for spec in args.also_ema]
    except ValueError as exc:
        ap.error(str(exc))
    if args.wide_small_talk and args.group_size > 1:
        ap.error("--wide-small-talk works on single requests; it cannot be combined with --group-size > 1")

    t0 = time.time()
    torch.manual_seed(args.init_seed)
    random.seed(args.init_seed)
    torch.set_num_threads(args.threads)

    tok, docs = prepared_data(args) if args.prepared else corpus_data(args, t0)
    if args.prepare_only:
        return
    template = chat_template(args.tool_list_at)
    pad_id = tok.token_to_id("<|endoftext|>")
    call_token_id = tok.token_to_id(TOOL_CALL_OPEN)
    too_long = sum(len(d.ids) > args.block for d in docs)
    docs = [d for d in docs if len(d.ids) <= args.block]
    n_tok = sum(len(d.ids) for d in docs)
    n_sup = sum(int(d.mask.sum()) for d in docs)
    print(f"tokenizer: vocab {tok.get_vocab_size()}; docs {len(docs)} (dropped {too_long} > {args.block}); "
          f"tokens {n_tok} (supervised {n_sup}); mean doc {n_tok / max(1, len(docs)):.0f} ({time.time() - t0:.0f}s)",
          flush=True)

    batches = bucket_batches(docs, args.batch_tokens, pad_id, args.init_seed)
    n_rows_tok = sum(b.ids.numel() for b in batches)
    print(f"batched: {len(batches)} batches of <= {args.batch_tokens} tokens (fill {n_tok / n_rows_tok:.1%})",
          flush=True)

    vocab = int(math.ceil(tok.get_vocab_size() / 64) * 64)
    # the exported context is the longest document trained on: past it the model has never seen a position, and
    # an engine that serves longer prompts measures that, not the model (training/JOURNAL.md, "eighth session")
    cfg = model_config(args, vocab)
    model = TinyLlama(cfg).to(args.device)
    # counted once here: summing a batch's targets at every step would wait on the device each time
    targets_per_batch = [int(b.targets.sum()) for b in batches]
    batches = [b.to(args.device) for b in batches]
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params {cfg}", flush=True)
    if args.muon_ns_dtype == "bfloat16" and args.device == "cpu" and not bfloat16_matmul_is_fast():
        print("WARNING: --muon-ns-dtype bfloat16 on a CPU without bfloat16 matrix units is slower than float32",
              flush=True)
    optimizers = build_optimizers(model, args.optimizer, args.lr, NS_DTYPES[args.muon_ns_dtype])
    # the average lives beside the model and is what gets exported: late in the run each step still moves the
    # weights, and which step the clock stops at is luck; measured on v7's run, the average of the last thousand or
    # so steps named tools and copied values better than the last step (training/JOURNAL.md, fifth session)
    # (--also-ema adds more averages of other decays, each with its own folder, to choose among on validation)
    averaged = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(args.ema_decay)) if args.ema_decay else None
    averages = ([(args.ema_decay, args.out, averaged)] if averaged is not None else []) + [
        (decay, out_dir, AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay)))
        for decay, out_dir in args.also_ema]

    per_epoch = len(batches)
    total = args.steps or max(1, int(per_epoch * args.epochs))
    gen = torch.Generator().manual_seed(args.init_seed)
    order = torch.randperm(per_epoch, generator=gen)
    t_train = time.time()
    budget_s = max(60.0, args.time_limit_min * 60 - (t_train - t0) - 60)  # keep a minute for export
    ema = None
    step = 0
    seen = 0
    seen_targets = 0  # supervised tokens: what a recipe buys with its time (groups spend fewer tokens on prompts)
    shipped = recorded_run(SHIPPED_CHECKPOINT)
    comparable = shipped is not None and (shipped.batch_tokens, shipped.group_size, shipped.optimizer) == (
        args.batch_tokens, args.group_size, args.optimizer)
    warned = False
    for step in range(total):
        if step % per_epoch == 0 and step > 0:
            order = torch.randperm(per_epoch, generator=gen)
        index = int(order[step % per_epoch])
        batch = batches[index]
        seen += batch.ids.numel()
        seen_targets += targets_per_batch[index]
        # progress is the larger of the step fraction and the time fraction: on an idle 2-core machine the
        # step count decides (deterministic); on a shared, slower one the schedule still completes in budget
        progress = max(step / total, (time.time() - t_train) / budget_s)
        if progress >= 1.0:
            print(f"time budget reached at step {step + 1}/{total}: schedule completed on time", flush=True)
            break
        lr = lr_at(progress, step, args.lr, args.warmup, args.schedule)
        for opt in optimizers:
            for g in opt.param_groups:
                g["lr"] = lr
        loss = recipe_loss(model, batch, args, call_token_id, pad_id)
        apply_update(model, loss, optimizers, [average for _, _, average in averages])
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 20 == 0 or step == total - 1:
            el = time.time() - t_train
            tps = seen / el
            print(f"step {step + 1}/{total} loss {loss.item():.4f} ema {ema:.4f} lr {lr:.2e} "
                  f"{tps:.0f} tok/s ({seen_targets / el:.0f} supervised) elapsed {el / 60:.1f} min", flush=True)
        if step + 1 in PACE_CHECKS and not args.steps:
            projected = projected_steps(step + 1, time.time() - t_train, budget_s, total)
            if shipped is None:
                against = "shipped run: unknown"
            elif comparable:
                against = f"shipped run: {shipped.steps}"
            else:
                against = (f"shipped run: {shipped.steps} steps of {shipped.batch_tokens}-token batches, group size "
                           f"{shipped.group_size}, {shipped.optimizer}; not comparable with this recipe's steps, "
                           "so no pace warning")
            print(f"pace: the budget ends the schedule near step {projected} of {total} ({against})", flush=True)
            warning = None if warned or not comparable else pace_warning(projected, shipped.steps)
            if warning:
                print(warning, flush=True)
                warned = True
        if step % 200 == 199:
            export_checkpoint(model, tok, args.out, metadata={"step": str(step + 1), "final": "false"},
                              chat_template=template)
    final = {"step": str(step + 1), "total_steps": str(total), "final": "true", **recipe_metadata(args)}
    if averaged is not None and args.raw_out:
        export_checkpoint(model, tok, args.raw_out, metadata={**final, "ema_decay": "0.0"}, chat_template=template)
    for decay, out_dir, average in averages[::-1]:  # the main average (first) last, as the run's final line
        export_checkpoint(average.module, tok, out_dir, metadata={**final, "ema_decay": str(decay)},
                          chat_template=template)
    if averaged is None:
        export_checkpoint(model, tok, args.out, metadata=final, chat_template=template)
    print(f"exported {args.out} after {(time.time() - t0) / 60:.1f} min total", flush=True)


if __name__ == "__main__":
    main()
