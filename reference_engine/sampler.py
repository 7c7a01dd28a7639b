"""Next-token choice and the log-probabilities reported with it.

Reported logprobs are those of the model's raw distribution (log-softmax of the logits before temperature / top-p, and
before any tool_choice constraint), so KL measured from them compares models, not sampling settings. Sampling uses a per-request torch.Generator, so a request
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
    greedy = logprobs.argmax(dim=-1).tolist()
    for i, seq in enumerate(seqs):
        p = seq.params
        allowed = _allowed_next(seq)
        row = logits[i].float()
        if allowed is not None:
            masked = torch.full_like(row, float("-inf"))
            idx = torch.tensor(sorted(allowed))
            masked[idx] = row[idx]
            row = masked
        if p.temperature <= 0.0:
            tok = greedy[i] if allowed is None else int(row.argmax())
        else:
            tok = _sample_row(row, p.temperature, p.top_p, seq.generator)
        top: list[tuple[int, float]] = []
        if p.logprobs and p.top_logprobs > 0:
            vals, idx = logprobs[i].topk(p.top_logprobs)
            top = list(zip(idx.tolist(), vals.tolist()))
        out.append(TokenChoice(tok, float(logprobs[i, tok]), top))
    return out


def _allowed_next(seq: Sequence) -> set[int] | None:
    """Tokens that keep the output on one of `allowed_starts`; None once unconstrained (or never constrained)."""
    starts = seq.params.allowed_starts
    if not starts:
        return None
    out = seq.output_ids
    n = len(out)
    live = [s for s in starts if len(s) >= n and list(s[:n]) == out]
    if not live or any(len(s) == n for s in live):
        return None
    return {s[n] for s in live}


def _sample_row(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator | None) -> int:
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sp, si = probs.sort(descending=True)
        keep = sp.cumsum(0) - sp < top_p            # smallest set whose mass reaches top_p (always >= 1 token)
        sp = sp * keep
        choice = torch.multinomial(sp / sp.sum(), 1, generator=gen)
        return int(si[choice])
    return int(torch.multinomial(probs, 1, generator=gen))
