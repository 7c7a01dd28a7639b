"""Fuzz the logprob payload parsers: a mutated payload is read or refused with LogprobFormatError, never another
exception (an AttributeError out of ``top_logprobs: 7`` used to end scoring). Seeded, bounded in count and time."""

from __future__ import annotations

import random
import time

from tests.http.test_fuzz_parsers import _mutate
from verifier.kinds.logprob.align import (
    LogprobFormatError,
    parse_chat_logprobs,
    parse_legacy_logprobs,
    parse_vllm_prompt_logprobs,
)

CHAT = [{"token": "a", "logprob": -0.1, "bytes": [97],
         "top_logprobs": [{"token": "a", "logprob": -0.1, "bytes": [97]}, {"token": "b", "logprob": -2.0}]},
        {"token": "b", "logprob": -0.3, "top_logprobs": [{"token": "b", "logprob": -0.3}]}]
LEGACY = {"tokens": ["a", "b"], "token_logprobs": [None, -0.2], "top_logprobs": [None, {"b": -0.2, "c": -1.0}],
          "text_offset": [0, 1]}
VLLM = [None, {"12": {"logprob": -0.1, "rank": 1, "decoded_token": "a"}, "7": {"logprob": -3.0, "rank": 9}}]


def test_mutated_logprob_payloads_are_read_or_refused_cleanly():
    rng = random.Random(17)
    parsers = ((parse_chat_logprobs, CHAT), (parse_legacy_logprobs, LEGACY),
               (lambda x: parse_vllm_prompt_logprobs(x, 5), VLLM))
    t_end = time.monotonic() + 15.0
    n = refused = 0
    while n < 6000 and time.monotonic() < t_end:
        fn, base = parsers[n % 3]
        try:
            fn(_mutate(rng, base))
        except LogprobFormatError:
            refused += 1
        n += 1
    assert n >= 1500 and 0 < refused < n
