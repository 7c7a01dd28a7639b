"""Shared fixtures: tiny random checkpoints (written once per session) and engines over them."""

from __future__ import annotations

import json

import pytest

from reference_engine.config import EngineConfig
from reference_engine.engine import Engine, ErrorEvent, FinishEvent, TokenEvent
from reference_engine.sequence import SamplingParams
from reference_engine.tiny_checkpoint import build_checkpoint


@pytest.fixture(scope="session")
def ckpt_factory(tmp_path_factory):
    cache: dict = {}

    def make(family: str = "llama", **kw):
        key = (family, json.dumps(kw, sort_keys=True))
        if key not in cache:
            cache[key] = build_checkpoint(tmp_path_factory.mktemp(f"ckpt-{family}"), family, **kw)
        return cache[key]

    return make


@pytest.fixture(scope="session")
def llama_ckpt(ckpt_factory):
    return ckpt_factory("llama")


def make_engine(path, **kw) -> Engine:
    kw.setdefault("weights", "fp32")
    kw.setdefault("kv_dtype", "fp32")
    kw.setdefault("threads", 1)
    return Engine(EngineConfig(model_path=path, **kw))


class Collector:
    """Sink that records a request's events (engine driven synchronously with run_until_idle)."""

    def __init__(self) -> None:
        self.events: list = []

    def __call__(self, ev) -> None:
        self.events.append(ev)

    @property
    def tokens(self) -> list[int]:
        return [e.choice.token_id for e in self.events if isinstance(e, TokenEvent)]

    @property
    def choices(self):
        return [e.choice for e in self.events if isinstance(e, TokenEvent)]

    @property
    def finish(self) -> FinishEvent | None:
        return next((e for e in self.events if isinstance(e, FinishEvent)), None)

    @property
    def error(self) -> ErrorEvent | None:
        return next((e for e in self.events if isinstance(e, ErrorEvent)), None)


def greedy(max_tokens: int, **kw) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, **kw)


def solo_tokens(path, prompts: list[list[int]], max_tokens: int, **engine_kw) -> list[list[int]]:
    """Each prompt greedily on a fresh engine of its own: what a shared batch must reproduce token for token."""
    out = []
    for p in prompts:
        eng = make_engine(path, **engine_kw)
        c = Collector()
        eng.submit("r", p, greedy(max_tokens), c)
        eng.run_until_idle()
        out.append(c.tokens)
    return out
