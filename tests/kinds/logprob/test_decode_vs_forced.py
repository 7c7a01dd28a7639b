"""The decode path's lower bound is compared with the forced path's KL only where both condition on the same tokens.

The forced path re-tokenizes the reference's generated text. A generated partial UTF-8 byte (or a merge BPE would not
produce) comes back as other tokens, and every forced position after it conditions on another context: comparing
by index there can make a decode-only difference appear where none is (``kl_mean`` withheld for nothing) or hide one.
"""

from __future__ import annotations

import numpy as np

from verifier.kinds.logprob.align import Position, TokenTrack
from verifier.kinds.logprob.scoring import PathData, _prefill_contradicted, _topk_path, decode_vs_forced


def _track(tokens: list[str], probs: list[float] | None = None, start: int = 0) -> TokenTrack:
    """Tokens with offsets from ``start``; each position's top-2: its own token (probability ``probs``, default 0.9)
    and one other."""
    out, off = [], start
    for i, tok in enumerate(tokens):
        p = 0.9 if probs is None else probs[i]
        out.append(Position(token=tok, logprob=float(np.log(p)), top={tok: float(np.log(p)),
                                                                      "~other": float(np.log(1 - p + 1e-9))},
                            offset=off))
        off += len(tok)
    return TokenTrack(out)


def test_positions_after_a_retokenized_byte_are_not_compared() -> None:
    generated = [" the", " cat", "\ufffd", " sat", " on"]  # a partial byte the text does not give back
    forced_tokens = [" the", " cat", "\u00e9", " sat", " on"]  # the forced text's own tokenization
    decode, forced = PathData(), PathData()
    # decode: the candidate is far off from the 3rd position on (a real decode-only change would look like this)
    ref_d, cand_d = _track(generated), _track(generated, [0.9, 0.9, 0.2, 0.2, 0.2])
    _topk_path(decode, "c", "chat_logprobs", ref_d, cand_d, 0)
    prompt = "Q:"
    ref_f, cand_f = _track(forced_tokens, start=len(prompt)), _track(forced_tokens, start=len(prompt))
    ref_f = TokenTrack([Position(token=prompt, logprob=None, top={}, offset=0), *ref_f.positions])
    cand_f = TokenTrack([Position(token=prompt, logprob=None, top={}, offset=0), *cand_f.positions])
    _topk_path(forced, "c", "completions_echo", ref_f, cand_f, len(prompt))
    assert decode.keys[0] is not None and decode.keys[0][:2] == [(0, " the"), (4, " cat")]
    assert forced.keys[0] is not None and forced.keys[0][:2] == [(0, " the"), (4, " cat")]
    cmp = decode_vs_forced(decode, forced)
    assert cmp is not None and cmp[2] == 2, cmp  # the two positions before the re-tokenized one, no more
    # the forced path saw no difference on those two positions, and the decode bound none above it there
    assert cmp[:2] == (0.0, 0.0)
    assert _prefill_contradicted({"decode": decode, "forced": forced}) is None


def test_without_position_keys_positions_are_compared_by_index() -> None:
    """Exact forced records carry no tokens: the comparison keeps the by-index rule (the leading positions)."""
    decode, forced = PathData(), PathData()
    decode.case_ids, decode.lower = ["c"], [np.array([0.5, 0.5])]
    forced.case_ids, forced.kl = ["c"], [np.array([0.1, 0.1, 0.9])]
    assert decode_vs_forced(decode, forced) == (0.5, 0.1, 2)
    d_keys: list[tuple[int, str]] = [(0, "a"), (1, "b")]
    decode.keys, forced.keys = [d_keys], [[(0, "a"), (1, "x"), (2, "b")]]
    assert decode_vs_forced(decode, forced) == (0.5, 0.1, 1)  # with keys: stops at the first unmatched token
