"""Cache suite against scripted loopback servers: absent / zero / partial / near-bound each produced and recognised."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.kinds.kind_context import kind_context
from verifier.http.client import EndpointClient
from verifier.kinds.cache.kind import CACHE_KIND
from verifier.records import EndpointConfig
from verifier.run.progress import Progress
from verifier.run.protocol import RunContext
from verifier.run.store import RecordStore
from verifier.testing import Reply, ScriptedServer


class CachingServer:
    """Counts prompt "tokens" as words; remembers prompts it saw and reports cached = shared prefix (in blocks)."""

    def __init__(self, mode: str, block: int = 4) -> None:
        self.mode, self.block, self.seen = mode, block, []

    def __call__(self, body: dict, ctx) -> Reply:
        words = " ".join(f"{m['role']}: {m['content']}" for m in body["messages"]).split()
        best = 0
        for old in self.seen:
            n = 0
            while n < min(len(old), len(words)) and old[n] == words[n]:
                n += 1
            best = max(best, n)
        self.seen.append(words)
        usage: dict = {"prompt_tokens": len(words), "completion_tokens": 1, "total_tokens": len(words) + 1}
        hit = best // self.block * self.block
        if self.mode == "zero":
            usage["prompt_tokens_details"] = {"cached_tokens": 0}
        elif self.mode == "partial":
            usage["prompt_tokens_details"] = {"cached_tokens": hit // 3}
        elif self.mode == "full":
            usage["prompt_cache_hit_tokens"] = hit  # DeepSeek's field: normalised by the client
        return Reply(content="ok", usage=usage)


async def _run(tmp: Path, servers: dict[str, ScriptedServer], suite_name: str = "cache-smoke"):
    suite = CACHE_KIND.load(suite_name, {})
    names = list(servers)
    async with kind_context(tmp, {n: s.base_url for n, s in servers.items()}) as ctx:
        await CACHE_KIND.run(suite, ctx)
        await CACHE_KIND.run(suite, ctx)  # resume: nothing sent twice
        records = ctx.store.read(suite=suite.manifest.name)
    return suite, records, {r.endpoint: r for r in CACHE_KIND.score(suite, records, names[0], names)}


def test_cache_classes(tmp_path: Path) -> None:
    with ScriptedServer(CachingServer("full")) as full, ScriptedServer(CachingServer("absent")) as absent, \
            ScriptedServer(CachingServer("zero")) as zero, ScriptedServer(CachingServer("partial")) as partial:
        suite, records, res = asyncio.run(_run(tmp_path, {"full": full, "absent": absent, "zero": zero,
                                                          "partial": partial}))
    turns = sum(len(s.turns) for s in suite.cases)
    assert len(records) == 4 * turns
    assert res["full"].extra["cache_class"] == "near_bound"
    assert res["absent"].extra["cache_class"] == "not_reported"
    assert res["zero"].extra["cache_class"] == "reported_zero"
    assert res["partial"].extra["cache_class"] == "partial"
    # absent is not zero: no hit-rate metric at all, and the note names vLLM's flag
    assert "cache_hit_rate" not in res["absent"].metrics
    assert "--enable-prompt-tokens-details" in res["absent"].notes[0]
    assert res["zero"].metrics["cache_hit_rate"].value == 0.0
    full_rate = res["full"].metrics["cache_hit_rate"]
    bound = res["full"].metrics["cache_bound"].value
    assert 0.8 * bound <= full_rate.value <= bound
    assert full_rate.n == turns - len(suite.cases)  # first request of each session excluded
    assert full_rate.low <= full_rate.value <= full_rate.high
    assert res["full"].extra["cached_field"] == "prompt_cache_hit_tokens"
    # the partial server reports a third of the hits: rate and paired difference say so
    assert res["partial"].metrics["cache_hit_rate"].value == pytest.approx(full_rate.value / 3, rel=0.1)
    diff = res["partial"].comparisons["cache_hit_rate"].difference
    assert diff.high < 0 and diff.n == len(suite.cases)
    series = res["full"].series[0]
    assert series.x[0] == 1.0 and all(y <= b + 1e-9 for y, b in zip(series.y, series.high))


def test_bad_session_line(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text('{"id": "a", "turns": [{"user": "x", "assistant": "y"}]}\n')
    suite = CACHE_KIND.load(str(p), {})
    assert suite.manifest.case_count == 0
    assert suite.problems[0].line == 1 and "turns" in suite.problems[0].message
    with pytest.raises(ValueError, match=r"s.jsonl:1: turns"):
        CACHE_KIND.load(str(p), {"strict": True})


def test_compare_counts_classes() -> None:
    from verifier.kinds.cache.token_accounting import compare_counts, note

    s = compare_counts([(10, 10), (12, 10), (13, 10), (20, 10), (9, 10)])
    assert (s.n, s.exact, s.within_tolerance, s.over, s.under) == (5, 1, 2, 1, 1)
    assert s.metrics()["prompt_tokens_accepted"].value == pytest.approx(3 / 5)
    assert s.metrics()["prompt_tokens_accepted"].n == 5
    assert "over-counted on 1/5" in note(s)


def test_token_accounting_against_scripted_overcount(tmp_path: Path) -> None:
    """A server that bills 5 tokens more than the rendered prompt has is caught as over-counting."""
    tiny = pytest.importorskip("reference_engine.tiny_checkpoint")
    from verifier.kinds.cache.token_accounting import LocalTokenizer

    tok_dir = tmp_path / "tok"
    tok_dir.mkdir()
    tiny.build_tokenizer(tok_dir)
    local = LocalTokenizer(tok_dir)

    def responder(body: dict, ctx) -> Reply:
        n = local.count_chat(body["messages"])
        return Reply(content="ok", usage={"prompt_tokens": n + 5, "completion_tokens": 1,
                                          "prompt_tokens_details": {"cached_tokens": 0}})

    suite = CACHE_KIND.load("cache-smoke", {"tokenizer": str(tok_dir), "limit": 2})
    with ScriptedServer(responder) as srv:
        store = RecordStore(tmp_path / "records.jsonl")

        async def go() -> None:
            async with EndpointClient(EndpointConfig(name="p", base_url=srv.base_url, model="scripted-model")) as c:
                await CACHE_KIND.run(suite, RunContext(run_dir=tmp_path, store=store, clients={"p": c}, reference="p",
                                                       candidates=[], repeats=1, seed=0,
                                                       progress=Progress(display=False), options={}))
        asyncio.run(go())
        records = store.read()
        store.close()
    res = CACHE_KIND.score(suite, records, "p", ["p"])[0]
    acc = res.extra["token_accounting"]
    assert acc["n"] == len(records) and acc["over"] == acc["n"] and acc["diff_mean"] == 5
    assert res.metrics["prompt_tokens_accepted"].value == 0.0
    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        CACHE_KIND.load("cache-smoke", {"tokenizer": str(tmp_path)})
