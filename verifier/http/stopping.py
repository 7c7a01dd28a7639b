"""When to stop sending to an endpoint whose chat requests are all refused (401/403/404), and the line that says so.

Why: preflight only asks ``GET /models``; a provider can answer that and still refuse every chat request (a key
without chat scope, a model name the chat route does not serve, a base URL one level off). Sending every case
then costs minutes and ends in "all N exchanges failed", which never names the 401. After
:data:`STOP_AFTER` chat replies in a row that are ``auth`` or ``not_found``, with no chat request ever answered,
the endpoint is stopped: requests not yet sent are not sent (and not recorded, so ``--resume`` sends them once
the cause is fixed), requests already in flight finish and are recorded, other endpoints go on.

The line names the status and what to check (the key's variable name, the model, the base URL), never the key.
"""

from __future__ import annotations

from dataclasses import dataclass

from verifier.http import redaction
from verifier.records import EndpointConfig

#: chat replies in a row, of the classes below and with no chat success before, that stop an endpoint
STOP_AFTER = 3
STOP_CLASSES = frozenset({"auth", "not_found"})


@dataclass
class EndpointStop:
    """Counts one endpoint's refused chat replies; :attr:`reason` is set once it must stop."""

    config: EndpointConfig
    streak: int = 0
    answered: bool = False  # a chat request succeeded once: refusals after that are not a wrong setup
    last_status: int | None = None
    reason: str | None = None
    not_sent: int = 0

    def observe(self, ok: bool, error_class: str | None, status: int | None) -> None:
        """One finished chat exchange (after its retries)."""
        if ok:
            self.answered, self.streak = True, 0
            return
        if error_class not in STOP_CLASSES or self.answered:
            self.streak = 0
            return
        self.streak += 1
        self.last_status = status
        if self.streak >= STOP_AFTER and self.reason is None:
            self.reason = self._why(status)

    def _why(self, status: int | None) -> str:
        cfg = self.config
        url = redaction.redact_url(cfg.base_url.rstrip("/")) or ""
        if status in (401, 403):
            hint = (f"check the key in ${cfg.api_key_env} (its value is never shown) and that it may use chat"
                    if cfg.api_key_env else "no API key is configured for it (pass --api-key-env VAR_NAME)")
        else:
            hint = (f"check the model name '{cfg.model}' and the base URL {url} "
                    f"(chat goes to {url}/chat/completions)")
        return (f"stopped after {self.streak} chat requests in a row were refused with HTTP {status} and none was "
                f"answered: {hint}")

    def line(self) -> str:
        """The run-level failure line: the reason and how many requests were never sent."""
        unsent = f"; {self.not_sent} request(s) not sent (--resume sends them)" if self.not_sent else ""
        return redaction.redact_message(f"endpoint '{self.config.name}': {self.reason}{unsent}") or ""
