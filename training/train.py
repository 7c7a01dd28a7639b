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
from pathlib import Path
from typing import cast

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from training.augment import RENAME_STYLES
from training.batching import (
    NOT_A_TARGET,
    SCHEMA_KEY,
    SCHEMA_NAME,
    Batch,
    Doc,
    bucket_batches,
    document_texts,
    encode_all,
    tree_mask,
)
from training.chat_format import (
    TOOL_CALL_OPEN,
    TOOL_LIST_PLACES,
    chat_template,
)
from training.corpus import AGENT_HORIZONS, build_corpus, dump_jsonl
from training.export import export_checkpoint
from training.model import TinyConfig, TinyLlama
from training.optim import NS_DTYPES, OPTIMIZERS, bfloat16_matmul_is_fast, build_optimizers
from training.pace import PACE_CHECKS, pace_warning, projected_steps, recorded_run
from training.tokenizer_train import train_tokenizer

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
    if batch.segments is None or batch.positions is None:  # a tree batch has both (bucket_batches)
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
    if pad_id is None or call_token_id is None:
        raise SystemExit(f"the tokenizer has no <|endoftext|> or {TOOL_CALL_OPEN} token")
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
            warning = None if warned or not comparable or shipped is None else pace_warning(projected, shipped.steps)
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
        export_checkpoint(cast(TinyLlama, average.module), tok, out_dir, metadata={**final, "ema_decay": str(decay)},
                          chat_template=template)
    if averaged is None:
        export_checkpoint(model, tok, args.out, metadata=final, chat_template=template)
    print(f"exported {args.out} after {(time.time() - t0) / 60:.1f} min total", flush=True)


if __name__ == "__main__":
    main()
