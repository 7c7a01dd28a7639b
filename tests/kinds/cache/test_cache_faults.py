"""Provider faults in the cache suite, through a loopback server that sends them: permanent 500s, hostile 200 bodies
and answers without ``prompt_tokens``. Every turn ends as a record, the turns left out of the hit rate are counted
by why, request/error counts match records.jsonl, and a resumed run's progress covers the whole run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.kinds.cache.test_cache_suite import CachingServer
from tests.kinds.kind_context import kind_context
from verifier.kinds.cache.kind import CACHE_KIND
from verifier.run.progress import Progress
from verifier.run.store import RecordStore
from verifier.testing import FaultInjector, ScriptedServer


class NoPromptTokens(CachingServer):
    """Leaves ``prompt_tokens`` out of the usage on every third request."""

    def __call__(self, body, ctx):
        reply = super().__call__(body, ctx)
        if ctx.request_index % 3 == 2:
            reply.usage = {k: v for k, v in reply.usage.items() if k != "prompt_tokens"}
        return reply


async def _pass(tmp: Path, servers: dict[str, ScriptedServer], suite, progress: Progress) -> None:
    async with kind_context(tmp, {n: s.base_url for n, s in servers.items()}, max_attempts=2, backoff_base=0.001,
                            progress=progress) as ctx:
        await CACHE_KIND.run(suite, ctx)


def test_cache_faults_are_counted_by_name_and_resume_progress_covers_the_run(tmp_path: Path) -> None:
    suite = CACHE_KIND.load("cache-smoke", {})
    faulty = FaultInjector(CachingServer("full"), {"permanent_500": 0.2, "hostile_body": 0.1}, seed=2)
    with ScriptedServer(CachingServer("full")) as ref, ScriptedServer(faulty) as cand, \
            ScriptedServer(NoPromptTokens("full")) as sparse:
        servers = {"ref": ref, "cand": cand, "sparse": sparse}
        asyncio.run(_pass(tmp_path, servers, suite, Progress(display=False)))
        # lose the last records as a kill would, then resume in a fresh process (a fresh Progress)
        path = tmp_path / "records.jsonl"
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-5]))
        progress = Progress(display=False)
        asyncio.run(_pass(tmp_path, servers, suite, progress))
    records = RecordStore(tmp_path / "records.jsonl").read(suite=suite.manifest.name)
    turns = sum(len(s.turns) for s in suite.cases)
    assert len(records) == 3 * turns and len({r.key() for r in records}) == 3 * turns
    assert progress.done == 3 * turns and progress.errors == sum(not r.ok for r in records)
    assert progress.resumed == 3 * turns - 5

    res = {r.endpoint: r for r in CACHE_KIND.score(suite, records, "ref", list(servers))}
    assert faulty.injected["permanent_500"] > 0 and faulty.injected["hostile_body"] > 0
    for ep, r in res.items():
        mine_all = [x for x in records if x.endpoint == ep]
        assert r.counts["requests"] == len(mine_all) and r.counts["request_errors"] == sum(not x.ok for x in mine_all)
        assert "no_prompt_tokens" not in r.counts
    by = {(x.endpoint, x.case_id, x.step): x for x in records}
    after_failed = sum(1 for (ep, sid, t), x in by.items()
                       if ep == "cand" and t and x.ok and not by[(ep, sid, t - 1)].ok)
    assert after_failed > 0 and res["cand"].counts["excluded_after_failed_turn"] == after_failed
    without = sum(1 for (ep, sid, t), x in by.items() if ep == "cand" and t and x.ok and by[(ep, sid, t - 1)].ok
                  and None in (x.usage.prompt_tokens, by[(ep, sid, t - 1)].usage.prompt_tokens))
    assert res["cand"].counts["excluded_without_prompt_tokens"] == without
    assert res["sparse"].counts["excluded_without_prompt_tokens"] > 0
    assert res["sparse"].counts["request_errors"] == 0
    # a hostile 200 is a classified error, never a turn with a made-up usage
    assert any(x.error_class == "malformed_response" for x in records if x.endpoint == "cand")
