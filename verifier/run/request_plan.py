"""What a suite will send, request by request, before anything is sent: the input of ``verifier run --dry-run``.

Why a kind describes it and the runner prices it: only a kind knows its request pattern (variants, repeats, agent
steps, per-turn cache prompts), and only the run knows endpoints, tokenizers and prices. A kind lists each
distinct request body once with how many times every endpoint sends it; the dry run (``verifier.run.dry_run``)
counts the body's prompt tokens and prices it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class PlannedRequest:
    """One request body each endpoint sends ``count`` times, with its reply cap.

    ``earlier_turns``: agent steps carry the replies and tool results of their ``earlier_turns`` previous steps on
    top of ``body`` (the first turn), so their prompt grows by that many turns.
    ``reference_only``: only the reference endpoint sends it (the tool-call reference's second answers to a share
    of the cases, :mod:`verifier.kinds.toolcall.reference_repeats`), so only the reference's plan counts it.
    """

    body: dict[str, Any]  # "messages" (+ "tools") for chat, or "prompt" for completions
    count: int
    max_tokens: int
    earlier_turns: int = 0
    reference_only: bool = False
