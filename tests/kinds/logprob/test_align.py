"""Alignment of logprob payloads: string/offset pairing, misaligned positions counted, formats parsed."""

from __future__ import annotations

import math

import pytest

from verifier.kinds.logprob.align import (
    LogprobFormatError,
    align_tracks,
    common_prefix,
    parse_chat_logprobs,
    parse_legacy_logprobs,
    parse_vllm_prompt_logprobs,
)


def _chat(tokens: list[str], tops: list[dict[str, float]]) -> list[dict]:
    return [{"token": t, "logprob": top.get(t, -9.0), "bytes": list(t.encode()),
             "top_logprobs": [{"token": s, "logprob": v, "bytes": list(s.encode())} for s, v in top.items()]}
            for t, top in zip(tokens, tops)]


def test_misaligned_positions_are_counted_not_paired() -> None:
    top = {"a": -0.1, "b": -2.5}
    ref = parse_chat_logprobs(_chat(["he", "llo", " world"], [top] * 3))
    # the candidate tokenised "hello" differently: only " world" starts at the same offset with the same string
    cand = parse_chat_logprobs(_chat(["h", "ello", " world"], [top] * 3))
    al = align_tracks(ref, cand)
    assert al.compared == 1
    assert al.misaligned == 4  # 2 reference + 2 candidate positions could not be paired
    assert al.ref.ids.shape == (1, 2)


def test_duplicate_top_strings_are_merged() -> None:
    entry = {"token": "x", "logprob": math.log(0.5), "top_logprobs": [
        {"token": "\ufffd", "logprob": math.log(0.2), "bytes": [0xE2]},
        {"token": "\ufffd", "logprob": math.log(0.1), "bytes": [0xE2, 0x82]},
        {"token": "y", "logprob": math.log(0.2)}, {"token": "y", "logprob": math.log(0.1)}]}
    pos = parse_chat_logprobs([entry]).positions[0]
    assert set(pos.top) == {"<0xe2>", "<0xe282>", "y"}  # undecodable bytes keep distinct keys
    assert pos.top["y"] == pytest.approx(math.log(0.3))


def test_legacy_and_vllm_formats() -> None:
    tr = parse_legacy_logprobs({"tokens": ["A", " b"], "token_logprobs": [None, -0.5],
                                "top_logprobs": [None, {" b": -0.5, " c": -1.5}]})
    assert [p.offset for p in tr.positions] == [0, 1] and tr.positions[0].logprob is None
    v = parse_vllm_prompt_logprobs([None, {"5": {"logprob": -0.2, "rank": 1, "decoded_token": " b"},
                                           "9": {"logprob": -3.0, "rank": 7, "decoded_token": " z"}}], k=1)
    assert v.positions[0].token == " z" and v.positions[0].top == {" b": -0.2}
    with pytest.raises(LogprobFormatError, match="logprobs.content is absent"):
        parse_chat_logprobs(None)
    with pytest.raises(LogprobFormatError, match=r"logprobs.content\[0\]"):
        parse_chat_logprobs([{"logprob": -1}])


def test_common_prefix() -> None:
    a = parse_chat_logprobs(_chat(["a", "b", "c"], [{"a": -1.0}] * 3))
    b = parse_chat_logprobs(_chat(["a", "b", "d"], [{"a": -1.0}] * 3))
    assert common_prefix(a, b) == 2
