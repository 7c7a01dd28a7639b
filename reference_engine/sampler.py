"""Next-token choice and the log-probabilities reported with it.

Reported logprobs are those of the model's raw distribution (log-softmax of the logits before temperature / top-p /
top-k / min-p, and before any penalty, logit bias or decoding constraint), so KL measured from them compares models,
not sampling settings. Sampling uses a per-request torch.Generator, so a request with a `seed` gets the same tokens
whatever else is in the batch.

Order on a row of logits: presence/frequency penalties (OpenAI), repetition penalty (vLLM), logit bias (OpenAI), the
decoding constraint's mask; then greedy argmax, or temperature, top-k, min-p, top-p and a draw. Each step is skipped
when its setting is at its no-op value, so a request that sets none of them costs what it did before they existed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from reference_engine.sequence import Sequence


@dataclass
class TokenChoice:
    token_id: int
    logprob: float
    top: list[tuple[int, float]]          # [(token_id, logprob)] best first, len = requested top_logprobs


def sample(logits: torch.Tensor, seqs: list[Sequence]) -> list[TokenChoice]:
    """logits [B, V] float32, one row per sequence."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    plain = [_plain_greedy(seq) for seq in seqs]
    # rows with nothing to apply before the argmax share one batched argmax (per-row work costs ~0.1 ms a row)
    toks: list[int] = logits.argmax(dim=-1).tolist() if any(plain) else [0] * len(seqs)
    for i, seq in enumerate(seqs):
        if not plain[i]:
            toks[i] = _choose(logits[i], seq)
    chosen = logprobs.gather(1, torch.tensor(toks, device=logprobs.device)[:, None])[:, 0].tolist()
    out: list[TokenChoice] = []
    for i, seq in enumerate(seqs):
        p = seq.params
        top: list[tuple[int, float]] = []
        if p.logprobs and p.top_logprobs > 0:
            vals, idx = logprobs[i].topk(p.top_logprobs)
            top = list(zip(idx.tolist(), vals.tolist()))
        out.append(TokenChoice(toks[i], chosen[i], top))
    return out


def _plain_greedy(seq: Sequence) -> bool:
    """Greedy with no penalty, bias or constraint: the token is the raw row's argmax."""
    p = seq.params
    return (p.temperature <= 0.0 and p.constraint is None and not p.logit_bias and p.repetition_penalty == 1.0
            and not ((p.presence_penalty or p.frequency_penalty) and seq.output_ids))


def _choose(logits_row: torch.Tensor, seq: Sequence) -> int:
    p = seq.params
    row = _biased(_penalised(logits_row.float(), seq), seq)
    mask = p.constraint.mask(seq.output_ids) if p.constraint is not None else None
    if mask is not None:
        row = row.masked_fill(~mask[: row.shape[0]], float("-inf"))
    if p.temperature <= 0.0:
        return int(row.argmax())
    return _sample_row(row, p.temperature, p.top_p, seq.generator, p.top_k, p.min_p)


def _penalised(row: torch.Tensor, seq: Sequence) -> torch.Tensor:
    """OpenAI's presence and frequency penalties: ``logit[j] -= c[j] * frequency + (c[j] > 0) * presence``, with
    c[j] the times token j was generated so far in this completion (the prompt does not count)."""
    p = seq.params
    if not (p.presence_penalty or p.frequency_penalty) or not seq.output_ids:
        return row
    counts = torch.bincount(torch.tensor(seq.output_ids), minlength=row.shape[0])[: row.shape[0]].float()
    return row - counts * p.frequency_penalty - (counts > 0).float() * p.presence_penalty


def _biased(row: torch.Tensor, seq: Sequence) -> torch.Tensor:
    """vLLM's repetition penalty (every token in the prompt or the output so far: a positive logit divided by it, a
    negative one multiplied), then OpenAI's logit bias (added to the named tokens' logits)."""
    p = seq.params
    if p.repetition_penalty != 1.0:
        seen = torch.zeros(row.shape[0], dtype=torch.bool, device=row.device)
        seen[torch.tensor(seq.token_ids, dtype=torch.long, device=row.device).clamp_(0, row.shape[0] - 1)] = True
        pen = torch.where(row > 0, row / p.repetition_penalty, row * p.repetition_penalty)
        row = torch.where(seen, pen, row)
    if p.logit_bias:
        ids = torch.tensor(list(p.logit_bias), dtype=torch.long, device=row.device)
        row = row.index_add(0, ids, torch.tensor(list(p.logit_bias.values()), dtype=row.dtype, device=row.device))
    return row


def _sample_row(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator | None,
                top_k: int = 0, min_p: float = 0.0) -> int:
    logits = logits / temperature
    if 0 < top_k < logits.shape[0]:  # vLLM: keep the k largest logits (ties at the k-th kept)
        logits = logits.masked_fill(logits < logits.topk(top_k).values[-1], float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if min_p > 0.0:  # vLLM: drop tokens below min_p x the most likely one's probability (after temperature)
        probs = probs.masked_fill(probs < min_p * probs.max(), 0.0)
        probs = probs / probs.sum()
    if top_p < 1.0:
        sp, si = probs.sort(descending=True)
        keep = sp.cumsum(0) - sp < top_p            # smallest set whose mass reaches top_p (always >= 1 token)
        sp = sp * keep
        choice = torch.multinomial(sp / sp.sum(), 1, generator=gen)
        return int(si[choice])
    return int(torch.multinomial(probs, 1, generator=gen))
