"""The ``cache`` suite kind: prompt-cache hit rates on multi-turn sessions with growing shared prefixes.

Each session is sent turn by turn (in order: turn t's prompt extends turn t-1's), sessions run
concurrently. Per endpoint:

* hit rate = sum(cached tokens) / sum(prompt tokens) over every request *after the first of its
  session* (the first request can only hit a cache warmed by someone else, so it is excluded), with a
  95% interval from resampling whole sessions;
* cacheable bound = sum(previous request's prompt tokens) / sum(prompt tokens) over the same requests:
  the longest prefix this session had already sent (providers cache in blocks, e.g. OpenAI from 1,024
  tokens in 128-token steps, the built-in engine in pages, so real hits sit a little under it);
* class: ``not_reported`` (no cached-token field at all), ``reported_zero``, ``partial``, ``near_bound``
  (>= 80% of the bound). Absent is never shown as zero: a structurally zero hit rate looks like a broken
  cache, and an absent field says nothing about the cache.

vLLM reports ``prompt_tokens_details.cached_tokens`` only when the server is started with
``--enable-prompt-tokens-details``; without it the field is absent and we say so.

Turns left out of the hit rate are counted by why: ``excluded_after_failed_turn`` (the previous turn's request
failed, so the cacheable prefix is unknown) and ``excluded_without_prompt_tokens`` (this or the previous answer's
usage had no ``prompt_tokens``). ``requests`` and ``request_errors`` match records.jsonl.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

from suites import SUITES_DIR
from verifier.kinds.cache.scoring import score_cache
from verifier.kinds.cache.sessions import LoadedCacheSuite, Session, load_sessions
from verifier.records import ExchangeRecord, SuiteManifest
from verifier.run.exchange_guard import guarded
from verifier.run.protocol import RunContext
from verifier.run.request_plan import PlannedRequest
from verifier.run.summary import EndpointSuiteResult

DATA_DIR = SUITES_DIR / "cache"
BUILTIN_SUITES = {
    "cache-smoke": ("8 short 4-turn sessions (growing prefixes; half share one system prompt), "
                    "for the tiny built-in model"),
    "cache-long": "12 5-turn sessions over 1,024 prompt tokens from the first turn, for real providers",
}



class CacheKind:
    kind = "cache"

    def load(self, ref: str, options: dict) -> LoadedCacheSuite:
        strict = bool(options.get("strict", False))
        path = DATA_DIR / f"{ref}.jsonl" if ref in BUILTIN_SUITES else Path(ref)
        sessions, problems = load_sessions(path, strict=strict)
        if options.get("limit"):
            sessions = sessions[: int(options["limit"])]
        canon = "\n".join(json.dumps(s.model_dump(), sort_keys=True) for s in sessions)
        name = ref if ref in BUILTIN_SUITES else (path.stem if path.stem.startswith("cache") else f"cache-{path.stem}")
        man = SuiteManifest(name=name, version="1", kind="cache", case_count=len(sessions),
                            content_hash=hashlib.sha256(canon.encode()).hexdigest(),
                            source=f"builtin:{ref}" if ref in BUILTIN_SUITES else str(path),
                            skipped_lines=len(problems))
        tok = options.get("tokenizer")
        if tok and not (Path(tok) / "tokenizer.json").is_file():
            raise FileNotFoundError(f"--option tokenizer={tok}: no tokenizer.json in that folder")
        return LoadedCacheSuite(manifest=man, cases=sessions, problems=problems, tokenizer_dir=tok)

    def planned_exchanges(self, suite: LoadedCacheSuite, ctx: RunContext) -> int:
        return len(ctx.endpoints) * sum(len(s.turns) for s in suite.cases)

    def planned_requests(self, suite: LoadedCacheSuite, ctx: RunContext) -> list[PlannedRequest]:
        """Every turn of every session, as ``run`` sends it (``--dry-run`` prices them)."""
        return [PlannedRequest(body={"messages": s.messages(t)}, count=1, max_tokens=s.max_tokens)
                for s in suite.cases for t in range(len(s.turns))]

    async def run(self, suite: LoadedCacheSuite, ctx: RunContext) -> None:
        done = ctx.store.done_keys()
        name = suite.manifest.name
        ctx.progress.advance_resumed(r for r in ctx.store.read(kind="cache", suite=name) if r.endpoint in ctx.endpoints)

        async def session(ep: str, s: Session) -> None:
            client = ctx.clients[ep]
            for t in range(len(s.turns)):  # in order: each turn extends the previous prompt
                if (name, s.id, ep, 0, t, None) in done:
                    continue
                body = {"messages": s.messages(t), "max_tokens": s.max_tokens, "temperature": 0}
                ex = await guarded(client.chat(body), body, stream=bool(client.config.stream))
                rec = ExchangeRecord(**ex.model_dump(), kind="cache", suite=name, case_id=s.id, endpoint=ep, step=t,
                                     extra={"group": s.group})
                ctx.store.append(rec)
                ctx.progress.advance(error=not rec.ok, retried=max(0, rec.attempts - 1))

        # endpoints one after another (so one endpoint's load does not skew another's cache), sessions concurrent
        for ep in ctx.endpoints:
            await asyncio.gather(*(session(ep, s) for s in suite.cases))

    def score(self, suite: LoadedCacheSuite, records: list[ExchangeRecord], reference: str,
              endpoints: list[str]) -> list[EndpointSuiteResult]:
        return score_cache(suite, records, reference, endpoints)


CACHE_KIND = CacheKind()
