"""A RunContext over real clients for tests that drive one suite kind directly (no runner, no run folder).

Why shared: the cache and logprob kind tests each opened clients, built the context and closed both by hand, the
same dozen lines every time; this is that setup once, with the store closed on exit like the runner does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from verifier.http.client import EndpointClient
from verifier.records import EndpointConfig
from verifier.run.progress import Progress
from verifier.run.protocol import RunContext
from verifier.run.store import RecordStore


@contextlib.asynccontextmanager
async def kind_context(run_dir: Path, urls: dict[str, str], *, model: str | None = "scripted-model",
                       max_attempts: int = 1, concurrency: int | None = None, backoff_base: float = 0.5,
                       preflight: bool = False, progress: Progress | None = None) -> AsyncIterator[RunContext]:
    """Clients for ``urls`` (name -> base URL; the first is the reference) and ``run_dir/records.jsonl``."""
    async with contextlib.AsyncExitStack() as stack:
        store = RecordStore(run_dir / "records.jsonl")
        stack.callback(store.close)
        clients = {}
        for name, url in urls.items():
            cfg = EndpointConfig(name=name, base_url=url, model=model, max_attempts=max_attempts,
                                 **({"concurrency": concurrency} if concurrency else {}))
            clients[name] = await stack.enter_async_context(EndpointClient(cfg, backoff_base=backoff_base))
            if preflight:
                await clients[name].preflight()
        names = list(urls)
        yield RunContext(run_dir=run_dir, store=store, clients=clients, reference=names[0], candidates=names[1:],
                         repeats=1, seed=0, progress=progress or Progress(display=False), options={})


def reference_only(ctx: RunContext) -> RunContext:
    """The context the runner gives a ``needs_reference_first`` kind before the candidates: the reference alone."""
    return RunContext(**{**ctx.__dict__, "candidates": []})
