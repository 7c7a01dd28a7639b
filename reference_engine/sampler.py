"""Next-token choice and the log-probabilities reported with it.

Reported logprobs are those of the model's raw distribution (log-softmax of the logits before temperature / top-p, and
before any penalty or decoding constraint), so KL measured from them compares models, not sampling settings. Sampling
uses a per-request torch.Generator, so a request
with a `seed` gets the same tokens whatever else is in the batch.
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
    out: list[TokenChoice] = []
    for i, seq in enumerate(seqs):
        p = seq.params
        row = _penalised(logits[i].float(), seq)
        mask = p.constraint.mask(seq.output_ids) if p.constraint is not None else None
        if mask is not None:
            row = row.masked_fill(~mask[: row.shape[0]], float("-inf"))
        if p.temperature <= 0.0:
            tok = int(row.argmax())
        else:
            tok = _sample_row(row, p.temperature, p.top_p, seq.generator)
        top: list[tuple[int, float]] = []
        if p.logprobs and p.top_logprobs > 0:
            vals, idx = logprobs[i].topk(p.top_logprobs)
            top = list(zip(idx.tolist(), vals.tolist()))
        out.append(TokenChoice(tok, float(logprobs[i, tok]), top))
    return out


def _penalised(row: torch.Tensor, seq: Sequence) -> torch.Tensor:
    """OpenAI's presence and frequency penalties: ``logit[j] -= c[j] * frequency + (c[j] > 0) * presence``, with
    c[j] the times token j was generated so far in this completion (the prompt does not count)."""
    p = seq.params
    if not (p.presence_penalty or p.frequency_penalty) or not seq.output_ids:
        return row
    counts = torch.bincount(torch.tensor(seq.output_ids), minlength=row.shape[0])[: row.shape[0]].float()
    return row - counts * p.frequency_penalty - (counts > 0).float() * p.presence_penalty


def _sample_row(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator | None) -> int:
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sp, si = probs.sort(descending=True)
        keep = sp.cumsum(0) - sp < top_p            # smallest set whose mass reaches top_p (always >= 1 token)
        sp = sp * keep
        choice = torch.multinomial(sp / sp.sum(), 1, generator=gen)
        return int(si[choice])
    return int(torch.multinomial(probs, 1, generator=gen))
