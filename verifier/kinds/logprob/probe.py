"""Which logprob methods an endpoint supports, found with one tiny request each and recorded.

Methods, in the order the KL figures prefer them:

* ``exact``: the built-in engine's ``POST /v1/x/distributions`` (full distributions, exact KL). Only
  tried on loopback endpoints: a real provider never has it, and a request to an unknown path is
  exactly the kind of probe a provider could single out.
* ``exact_decode``: the same extension with ``forced_token_ids``: a given continuation teacher-forced through
  the engine's DECODE step (decode weights, KV cache format), full distributions at every position.
* ``completions_echo``: ``/v1/completions`` with ``echo`` + ``logprobs`` (+ ``max_tokens`` 0, else 1):
  teacher forcing on a given text, prompt-token top-k logprobs.
* ``vllm_prompt_logprobs``: vLLM's ``prompt_logprobs`` extension on ``/v1/completions``.
* ``chat_logprobs``: chat completions with ``logprobs`` + ``top_logprobs`` on greedy generation: an
  ordinary-looking request; compared with the reference on the common prefix only.

A method is supported when the answer has the promised shape with non-empty top-k lists; otherwise
the reason is kept (HTTP status / missing field), so "no logprobs" is a reported fact, never KL 0.

A probe that meets a provider fault (5xx, 429, timeout, a broken connection, a body no parser can read) learnt
nothing about support: it is an *error* (``MethodProbe.error``), probed again up to ``PROBE_ROUNDS`` times, and
never reported as "unsupported" nor reused by ``--resume``.
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlparse

from pydantic import BaseModel, Field

from verifier.http.client import EndpointClient
from verifier.kinds.logprob.align import (
    LogprobFormatError,
    parse_chat_logprobs,
    parse_legacy_logprobs,
    parse_vllm_prompt_logprobs,
)
from verifier.records import BUDGET_REFUSED
from verifier.run.exchange_guard import PROVIDER_FAULTS, one_line

METHODS = ("exact", "exact_decode", "completions_echo", "vllm_prompt_logprobs", "chat_logprobs")
PROBE_TEXT = "The quick brown fox jumps over the lazy dog."
PROBE_TOP = 5
PROBE_ROUNDS = 3  # a method whose probe met a provider fault is probed again, at most this many times in all


class MethodProbe(BaseModel):
    supported: bool
    reason: str | None = None  # why not, in one line
    max_tokens: int | None = None  # completions_echo: 0 if accepted, else 1
    top_k: int | None = None  # how many alternatives the endpoint actually returned
    error: str | None = None  # the probe met a provider fault: support unknown (not "unsupported")


class ProbeResult(BaseModel):
    endpoint: str
    methods: dict[str, MethodProbe] = Field(default_factory=dict)

    def supported(self, method: str) -> bool:
        m = self.methods.get(method)
        return bool(m and m.supported)

    def errors(self) -> dict[str, str]:
        """Methods whose probe failed at the provider, with the one-line reason."""
        return {name: m.error for name, m in self.methods.items() if m.error}


def is_loopback(base_url: str) -> bool:
    host = urlparse(base_url).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


def _why(ex: Any) -> str:
    return f"HTTP {ex.status}: {ex.error_class}" + (f" ({ex.error_message[:120]})" if ex.error_message else "")


def _failed(ex: Any) -> MethodProbe:
    """A failed probe request: a provider fault is an error (support unknown); anything else (400, 404...) is
    the endpoint saying no."""
    if ex.error_class in PROVIDER_FAULTS or ex.error_class == BUDGET_REFUSED:  # refused by the budget: not asked
        return MethodProbe(supported=False, reason=_why(ex), error=_why(ex))
    return MethodProbe(supported=False, reason=_why(ex))


async def probe_exact(client: EndpointClient) -> MethodProbe:
    if not is_loopback(client.config.base_url):
        return MethodProbe(supported=False, reason="not a loopback endpoint (the extension is the built-in engine's)")
    status, data, ex = await client.post_json("/x/distributions", {"prompt": PROBE_TEXT, "prompt_token_ids": None,
                                                                   "start": 1})
    if not ex.ok:
        return _failed(ex)
    if status != 200 or not isinstance(data, dict) or "logprobs_b64" not in data:
        return MethodProbe(supported=False, reason="no logprobs_b64 in the answer")
    return MethodProbe(supported=True, top_k=int(data.get("vocab_size") or 0))


async def probe_exact_decode(client: EndpointClient) -> MethodProbe:
    """Teacher-forced decode (one forced token): an engine of before that extension answers 400, named here."""
    if not is_loopback(client.config.base_url):
        return MethodProbe(supported=False, reason="not a loopback endpoint (the extension is the built-in engine's)")
    status, data, ex = await client.post_json("/x/distributions", {"prompt": PROBE_TEXT, "prompt_token_ids": None,
                                                                   "forced_token_ids": [0]})
    if not ex.ok:
        return _failed(ex)
    if status != 200 or not isinstance(data, dict) or data.get("path") != "decode" or data.get("shape", [0])[0] != 1:
        return MethodProbe(supported=False, reason="no decode-path distribution in the answer")
    return MethodProbe(supported=True, top_k=int(data.get("vocab_size") or 0))


async def probe_completions_echo(client: EndpointClient, top: int = PROBE_TOP) -> MethodProbe:
    last = MethodProbe(supported=False, reason="no answer")
    for max_tokens in (0, 1):
        ex = await client.completions({"prompt": PROBE_TEXT, "max_tokens": max_tokens, "echo": True,
                                       "logprobs": top, "temperature": 0})
        if not ex.ok:
            last = _failed(ex)
            if last.error:
                return last  # a provider fault: max_tokens 1 would tell nothing more
            continue
        try:
            track = parse_legacy_logprobs(((ex.response or {}).get("choices") or [{}])[0].get("logprobs"))
        except LogprobFormatError as e:
            return MethodProbe(supported=False, reason=str(e))
        tops = [len(p.top) for p in track.positions[1:]]
        if len(track.positions) < 2 or not tops or min(tops) == 0:
            return MethodProbe(supported=False, reason="echo returned no prompt-token top_logprobs")
        return MethodProbe(supported=True, max_tokens=max_tokens, top_k=min(tops))
    return last


async def probe_vllm_prompt_logprobs(client: EndpointClient, top: int = PROBE_TOP) -> MethodProbe:
    ex = await client.completions({"prompt": PROBE_TEXT, "max_tokens": 1, "prompt_logprobs": top,
                                   "temperature": 0})
    if not ex.ok:
        return _failed(ex)
    choice = ((ex.response or {}).get("choices") or [{}])[0]
    try:
        track = parse_vllm_prompt_logprobs(choice.get("prompt_logprobs"), top)
    except LogprobFormatError as e:
        return MethodProbe(supported=False, reason=str(e))
    if not track.positions:
        return MethodProbe(supported=False, reason="prompt_logprobs is empty")
    return MethodProbe(supported=True, top_k=min(len(p.top) for p in track.positions))


async def probe_chat_logprobs(client: EndpointClient, top: int = PROBE_TOP) -> MethodProbe:
    ex = await client.chat({"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 3,
                            "temperature": 0, "logprobs": True, "top_logprobs": top}, stream=False)
    if not ex.ok:
        return _failed(ex)
    try:
        track = parse_chat_logprobs(ex.logprobs)
    except LogprobFormatError as e:
        return MethodProbe(supported=False, reason=str(e))
    if not track.positions or min(len(p.top) for p in track.positions) == 0:
        return MethodProbe(supported=False, reason="chat logprobs came without top_logprobs")
    return MethodProbe(supported=True, top_k=min(len(p.top) for p in track.positions))


async def probe_endpoint(name: str, client: EndpointClient, *, rounds: int = PROBE_ROUNDS,
                         top: int = PROBE_TOP) -> ProbeResult:
    """Try every method (sequentially: four tiny requests); methods that met a provider fault are tried again,
    up to ``rounds`` times in all. Whatever still failed stays an error in the result.

    ``top`` is the number of alternatives the cases will ask for: a server capped below it (vLLM's
    ``--max-logprobs``) refuses every such request with HTTP 400 rather than returning fewer, so a probe asking for
    fewer would pass and every case would then fail; asked with the cases' K, the method is found unsupported here,
    with the server's own reason.
    """
    out = ProbeResult(endpoint=name)
    probes = (("exact", probe_exact), ("exact_decode", probe_exact_decode),
              ("completions_echo", functools.partial(probe_completions_echo, top=top)),
              ("vllm_prompt_logprobs", functools.partial(probe_vllm_prompt_logprobs, top=top)),
              ("chat_logprobs", functools.partial(probe_chat_logprobs, top=top)))
    for _ in range(max(1, rounds)):
        for method, fn in probes:
            if method in out.methods and not out.methods[method].error:
                continue
            try:
                out.methods[method] = await fn(client)
            except Exception as e:  # noqa: BLE001 - a probe that raised learnt nothing: an error, not "unsupported"
                out.methods[method] = MethodProbe(supported=False, reason=one_line(e), error=one_line(e))
        if not out.errors():
            break
    return out
