"""``--probe-context``: one request near an endpoint's stated context length, to check the claim.

Opt-in because it costs what it says: a prompt of nearly ``context_length`` tokens (131072 tokens at a provider's
price is real money). Without a tokenizer for every model, the prompt is a repeated word sized from the endpoint's
own token count: two small requests measure tokens per word (``usage.prompt_tokens``, chat template included),
then one request aims at 97% of the stated limit with ``max_tokens`` 1. The endpoint's reported ``prompt_tokens``
on that request is the measurement; a refusal with a 4xx is the contradiction.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pydantic import BaseModel, Field

from verifier.http.client import EndpointClient
from verifier.http.endpoints import EndpointSet
from verifier.records import Exchange
from verifier.run.claims import ContextProbe

log = logging.getLogger(__name__)

WORD = " hello"
FILL = 0.97  # share of the stated limit the probe aims at: near it, with room for the estimate's error
SIZING_WORDS = (32, 96)  # words in the two sizing requests


def probe_body(words: int) -> dict:
    """A probe request of ``words`` words and one reply token (``--dry-run`` prices the same bodies)."""
    return {"messages": [{"role": "user", "content": (WORD * words).strip()}], "max_tokens": 1, "temperature": 0}


def target_tokens(stated: int) -> int:
    """The prompt size the large request aims at: just under ``FILL`` of the stated limit."""
    return int(FILL * stated) - 1


def _line(ex: Exchange) -> str:
    return (ex.error_message or ex.error_class or f"HTTP {ex.status}").strip().splitlines()[0][:300]


async def probe_context(client: EndpointClient, stated: int) -> ContextProbe:
    """Size the probe from two small requests, then send one near ``stated`` tokens; never raises for the endpoint."""
    counts = []
    for n in SIZING_WORDS:
        ex = await client.chat(probe_body(n), stream=False)
        if not ex.ok or ex.usage.prompt_tokens is None:
            return ContextProbe(stated=stated, target_tokens=0, status=ex.status,
                                error=f"sizing request failed or reported no prompt_tokens: {_line(ex)}")
        counts.append(ex.usage.prompt_tokens)
    per_word = (counts[1] - counts[0]) / (SIZING_WORDS[1] - SIZING_WORDS[0])
    overhead = counts[0] - per_word * SIZING_WORDS[0]
    if per_word <= 0:
        return ContextProbe(stated=stated, target_tokens=0, error="prompt_tokens did not grow with the prompt")
    target = target_tokens(stated)
    words = max(1, int((target - overhead) / per_word))
    ex = await client.chat(probe_body(words), stream=False)
    log.info("context probe: %d words, status %s, prompt_tokens %s", words, ex.status, ex.usage.prompt_tokens)
    return ContextProbe(stated=stated, target_tokens=target, prompt_tokens=ex.usage.prompt_tokens, status=ex.status,
                        accepted=ex.ok, error=None if ex.ok else _line(ex))


PROBES_FILE = "context_probe.json"


class ContextProbes(BaseModel):
    """``context_probe.json`` in the run folder: endpoint -> its probe, read when the summary is (re)written."""

    probes: dict[str, ContextProbe] = Field(default_factory=dict)


async def probe_endpoints(clients: dict[str, EndpointClient], endpoints: EndpointSet, run_dir: Path) -> None:
    """Probe every endpoint that states a context length; the results land in the run folder for scoring."""
    found = ContextProbes()
    for cfg in endpoints.endpoints:
        if cfg.claims is not None and cfg.claims.context_length is not None:
            found.probes[cfg.name] = await probe_context(clients[cfg.name], cfg.claims.context_length)
    if found.probes:
        (run_dir / PROBES_FILE).write_text(found.model_dump_json(indent=2), encoding="utf-8")


def load_probes(run_dir: Path) -> dict[str, ContextProbe]:
    """The probes of a run folder; none when the run was not asked to probe (or the file is unreadable)."""
    path = Path(run_dir) / PROBES_FILE
    if not path.is_file():
        return {}
    try:
        return ContextProbes.model_validate_json(path.read_text(encoding="utf-8")).probes
    except (OSError, ValueError) as e:
        log.warning("%s: not read (%s); context_length claims stay not checked", path, e)
        return {}
