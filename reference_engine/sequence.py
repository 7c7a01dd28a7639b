"""A request's state inside the engine: tokens, sampling settings, pages it owns and the tags it expects."""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field

import torch

from reference_engine.constraints import Constraint


class SeqStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    logprobs: bool = False
    top_logprobs: int = 0
    # None = no prompt logprobs; k >= 0 = chosen token + top-k per prompt position
    prompt_logprobs: int | None = None
    full_distribution_from: int | None = None  # /v1/x/distributions: keep full log-softmax rows from this position
    # OpenAI's penalties on the logits of tokens already generated in this completion (counts c):
    # logit -= frequency_penalty * c + presence_penalty * (c > 0)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    # OpenAI's logit_bias: token id -> added to its logit (None: off)
    logit_bias: dict[int, float] | None = None
    # vLLM's: top_k (0: all tokens), min_p (0: off), repetition_penalty over prompt + output tokens (1: off)
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    # constrained decoding (forced tool calls, json_object, tool_choice "none"): see reference_engine.constraints
    constraint: Constraint | None = None
    # teacher-forced decode (reference_engine.forced): take these tokens instead of sampling, keep each step's row
    forced_tokens: tuple[int, ...] | None = None


_ids = itertools.count(1)


@dataclass
class Sequence:
    prompt_ids: list[int]
    params: SamplingParams
    request_id: str = ""
    seq_id: int = field(default_factory=lambda: next(_ids))
    status: SeqStatus = SeqStatus.WAITING
    output_ids: list[int] = field(default_factory=list)
    block_table: list[int] = field(default_factory=list)
    expected_tags: list[int] = field(default_factory=list)
    num_cached_tokens: int = 0              # prompt tokens served from the prefix cache (reported in usage)
    num_computed: int = 0                   # tokens whose K/V are in the pool
    generator: torch.Generator | None = None
    arrival: float = 0.0
    preempted: int = 0
    forced_rows: list[torch.Tensor] = field(default_factory=list)  # forced decode: raw log-softmax row per step

    @property
    def token_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    def __len__(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    def num_pages_for(self, n_tokens: int, page_size: int) -> int:
        return (n_tokens + page_size - 1) // page_size
