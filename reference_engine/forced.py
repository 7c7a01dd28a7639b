"""Teacher-forced decode: a given continuation fed token by token through the engine's DECODE step.

Why: a quantization applied only when decoding (INT4 decode weights, an FP8 KV cache read back after prefill) is
invisible to teacher forcing through prefill (``/v1/x/distributions`` on prompt + continuation), and a greedy
generation diverges from the reference's after a few tokens, so no position after that can be compared. Forcing
the reference's continuation through decode gives, at every position, the next-token distribution exactly as
generation computes it: the prompt is prefilled as usual (its last row predicts the first forced token, as in
generation), then each forced token is written to the KV cache by a decode pass whose output predicts the next one.

The engine keeps its loop; at the point where it would take the sampled token it takes the forced one instead
(:func:`force_choices`) and keeps the raw log-softmax row (before penalties / bias / constraints, like reported
logprobs), emitted as one ``DistributionEvent`` when the request finishes (:func:`forced_rows`).
"""

from __future__ import annotations

import torch

from reference_engine.sampler import TokenChoice
from reference_engine.sequence import Sequence


def force_choices(logits: torch.Tensor, seqs: list[Sequence], choices: list[TokenChoice]) -> list[TokenChoice]:
    """``choices`` with each forced sequence's choice replaced by its next forced token (its logprob and top-k read
    from the same raw row), and that row kept on the sequence. ``logits`` [B, V]: one row per sequence."""
    if not any(s.params.forced_tokens is not None for s in seqs):
        return choices
    out = list(choices)
    for i, seq in enumerate(seqs):
        forced = seq.params.forced_tokens
        if forced is None:
            continue
        row = torch.log_softmax(logits[i].float(), dim=-1)
        seq.forced_rows.append(row)
        tok = forced[len(seq.output_ids)]
        out[i] = TokenChoice(tok, float(row[tok]), choices[i].top)
    return out


def forced_rows(seq: Sequence) -> torch.Tensor | None:
    """The kept rows as one float32 [n_forced, V] tensor (row i predicts forced token i), or None if not forced."""
    if seq.params.forced_tokens is None:
        return None
    return torch.stack(seq.forced_rows) if seq.forced_rows else torch.zeros(0, 0)
