"""Fixtures for agent runner tests: a real scripted HTTP server, the real endpoint client and record store."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.http.client import EndpointClient
from verifier.records import EndpointConfig
from verifier.run.protocol import RunContext
from verifier.run.store import RecordStore


@dataclass
class CountingProgress:
    """Counts what the runner reports, so tests can check the progress contract (advance(n, error, retried))."""

    done: int = 0
    errors: int = 0
    retried: int = 0

    def advance(self, n: int = 1, error: bool = False, retried: int = 0) -> None:
        self.done += n
        self.errors += int(error)
        self.retried += retried

    def advance_resumed(self, records) -> None:
        """Records an earlier run left on disk (--resume): counted like live ones."""
        for r in records:
            self.advance(1, error=not r.ok, retried=max(0, r.attempts - 1))


async def open_context(stack: AsyncExitStack, run_dir: Path, base_url: str, endpoints: list[str],
                       options: dict[str, Any]) -> RunContext:
    """A RunContext whose endpoints all point at one scripted server, each under its own model id."""
    clients = {}
    for name in endpoints:
        cfg = EndpointConfig(name=name, base_url=base_url, model=name, concurrency=16, max_attempts=2, timeout=30)
        clients[name] = await stack.enter_async_context(EndpointClient(cfg))
    store = RecordStore(run_dir / "records.jsonl")
    stack.callback(store.close)
    return RunContext(run_dir=run_dir, store=store, clients=clients, reference=endpoints[0],
                      candidates=endpoints[1:], repeats=1, seed=0, progress=CountingProgress(), options=options)
