"""Prompt-token accounting: does the endpoint bill the prompt tokens the prompt actually has?

Where the tokenizer is known (the built-in engine's model, or a ``tokenizer.json`` folder the user
gives with ``--option tokenizer=DIR``), the rendered prompt (the checkpoint's chat template with
``add_generation_prompt``) is counted locally and compared with ``usage.prompt_tokens``. A provider
may legitimately add a few template tokens it does not show (Kimi's vendor verifier accepts +0..3), so
differences are classed: exact, within tolerance (+1..+3), over-counted (> +3), under-counted (< 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from verifier.records import Interval
from verifier.stats.intervals import wilson

TOLERANCE = 3  # tokens over the local count still accepted (Kimi's K2 vendor verifier: +0..3)


class TokenizerUnavailable(ValueError):
    """The tokenizer folder cannot be used (one line naming the file)."""


class LocalTokenizer:
    """A checkpoint's tokenizer + chat template, counted the way the built-in engine counts prompts."""

    def __init__(self, model_dir: Path) -> None:
        from reference_engine.tokenizer import Tokenizer

        try:
            self.tok = Tokenizer(Path(model_dir))
        except Exception as e:  # noqa: BLE001 - ConfigError or a tokenizers parse error: one line
            raise TokenizerUnavailable(f"tokenizer {model_dir}: {str(e).splitlines()[0]}") from None
        self.model_dir = Path(model_dir)

    def count_text(self, text: str) -> int:
        return len(self.tok.encode(text))

    def render_chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        from reference_engine.chat_template import render_chat

        if not self.tok.chat_template:
            raise TokenizerUnavailable(f"tokenizer {self.model_dir}: no chat_template in tokenizer_config.json")
        return render_chat(self.tok.chat_template, messages, tools=tools, add_generation_prompt=True,
                           bos_token=self.tok.bos_token, eos_token=self.tok.eos_token)

    def count_chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
        return self.count_text(self.render_chat(messages, tools))


def tokenizer_for(model_id: str | None, user_dir: str | Path | None = None) -> LocalTokenizer | None:
    """The user's tokenizer folder if given, else the shipped model's when the endpoint serves it, else None."""
    if user_dir:
        return LocalTokenizer(Path(user_dir))
    from reference_engine.config import SHIPPED_MODEL_NAME, default_model_path
    if model_id == SHIPPED_MODEL_NAME and (default_model_path() / "tokenizer.json").is_file():
        return LocalTokenizer(default_model_path())
    return None


class AccountingSummary(BaseModel):
    n: int = 0
    exact: int = 0
    within_tolerance: int = 0  # +1..+TOLERANCE
    over: int = 0  # > +TOLERANCE
    under: int = 0  # < 0
    diff_mean: float | None = None
    diff_max: int | None = None
    diff_min: int | None = None
    tolerance: int = TOLERANCE
    examples: list[dict[str, int]] = Field(default_factory=list)  # a few (reported, local) pairs off tolerance

    def metrics(self) -> dict[str, Interval]:
        if not self.n:
            return {}
        ok = self.exact + self.within_tolerance
        return {"prompt_tokens_accepted": wilson(ok, self.n),
                "prompt_tokens_overcount_mean": Interval(value=self.diff_mean, n=self.n, method="mean")}


def compare_counts(pairs: list[tuple[int, int]], tolerance: int = TOLERANCE) -> AccountingSummary:
    """``pairs`` = (reported usage.prompt_tokens, locally counted tokens) per request."""
    if not pairs:
        return AccountingSummary(tolerance=tolerance)
    d = np.array([r - c for r, c in pairs])
    s = AccountingSummary(n=len(pairs), exact=int((d == 0).sum()),
                          within_tolerance=int(((d > 0) & (d <= tolerance)).sum()),
                          over=int((d > tolerance).sum()), under=int((d < 0).sum()), diff_mean=float(d.mean()),
                          diff_max=int(d.max()), diff_min=int(d.min()), tolerance=tolerance)
    s.examples = [{"reported": r, "local": c} for r, c in pairs if not 0 <= r - c <= tolerance][:5]
    return s


def note(s: AccountingSummary) -> str | None:
    if not s.n:
        return None
    if s.over:
        return (f"prompt tokens over-counted on {s.over}/{s.n} requests (more than +{s.tolerance} over the local "
                f"count of the rendered prompt; max +{s.diff_max})")
    if s.under:
        return f"prompt tokens under-counted on {s.under}/{s.n} requests (min {s.diff_min}): a different tokenizer?"
    return f"prompt token counts match the local tokenizer within +0..{s.tolerance} on {s.n}/{s.n} requests"
