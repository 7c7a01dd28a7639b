"""Reading logprob records back: the record -> token-track step, and the record names both sides agree on.

Why its own module: the kind writes these records while measuring (the reference's generation is the text every
endpoint is then forced on) and scoring reads them again offline; with the step in either of them, each would
import the other.
"""

from __future__ import annotations

from typing import Any

from verifier.kinds.logprob.align import (
    TokenTrack,
    parse_chat_logprobs,
    parse_legacy_logprobs,
    parse_vllm_prompt_logprobs,
)
from verifier.records import ExchangeRecord

TOP_K = 20  # top-k log-probabilities asked of every endpoint
PROBE_CASE = "_probe"
PROBE_FAILED = "probe_failed"  # variant prefix of a probe that met provider faults (never reused on resume)
CASE_ERROR = "case_error"  # variant of the record left by an exception while measuring one case
SAMPLE_PREFIX = "sample"  # reference's sampled continuation j: variant "sample<j>"; forced on each: "forced_sample<j>"



def first_choice(rec: ExchangeRecord) -> dict[str, Any]:
    choices = (rec.response or {}).get("choices")
    return choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}


def generation_track(rec: ExchangeRecord) -> TokenTrack:
    if rec.extra.get("api") == "completions":
        return parse_legacy_logprobs(first_choice(rec).get("logprobs"))
    return parse_chat_logprobs(rec.logprobs)


def generation_text(rec: ExchangeRecord) -> str:
    """The exact text the logprobs cover (tool calls included, as the model emitted them)."""
    return generation_track(rec).text


def forced_track(rec: ExchangeRecord, continuation: str) -> tuple[TokenTrack, int]:
    """Echo track without the generated tail, and the character offset where the continuation starts."""
    if rec.variant == "forced_vllm":
        track = parse_vllm_prompt_logprobs(first_choice(rec).get("prompt_logprobs"), int(rec.extra.get("top_k", TOP_K)))
    else:
        track = parse_legacy_logprobs(first_choice(rec).get("logprobs"))
    gen = int(rec.extra.get("generated_tokens", 0))
    if gen:
        track = TokenTrack(track.positions[:-gen])
    return track, max(0, len(track.text) - len(continuation))
