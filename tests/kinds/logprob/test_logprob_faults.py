"""Provider faults in the logprob suite, through loopback servers that really send them: a failed request never
makes its case vanish (planned vs measured in every result), a probe that meets 5xx is an error that is retried
and never "unsupported" nor reused on resume, and an odd 200 distributions body is classified, not a KeyError
that ends the suite for every other endpoint.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.kinds.kind_context import kind_context, reference_only
from verifier.kinds.logprob.kind import LOGPROB_KIND
from verifier.kinds.logprob.probe import METHODS
from verifier.run.progress import Progress
from verifier.testing import FaultInjector, Reply, ScriptedServer

from .toy_lm import ToyLM


def _suite_file(tmp: Path) -> Path:
    lines = [{"id": f"t{i}", "kind": "text", "prompt": p, "max_tokens": 10}
             for i, p in enumerate(["the cat of", "in one is", "you that was for", "they be at one", "a of to",
                                    "his they be", "with as the", "it you that"])]
    lines += [{"id": f"c{i}", "kind": "chat", "messages": [{"role": "user", "content": m}], "max_tokens": 8}
              for i, m in enumerate(["hello there", "with as his", "one have this", "from the a"])]
    p = tmp / "toy.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return p


async def _run(tmp: Path, servers: dict[str, ScriptedServer], passes: int = 1):
    suite = LOGPROB_KIND.load(str(_suite_file(tmp)), {})
    names = list(servers)
    progress = Progress(display=False)
    async with kind_context(tmp, {n: s.base_url for n, s in servers.items()}, max_attempts=2, backoff_base=0.001,
                            progress=progress) as ctx:
        for _ in range(passes):  # a second pass is what --resume does
            await LOGPROB_KIND.run(suite, reference_only(ctx))
            await LOGPROB_KIND.run(suite, ctx)
        records = ctx.store.read(suite=suite.manifest.name)
    return suite, records, {r.endpoint: r for r in LOGPROB_KIND.score(suite, records, names[0], names)}, progress


class _FailFirst:
    """Answers 500 to the first ``n`` requests, then as the toy model: a provider that hiccups during the probe."""

    def __init__(self, n: int) -> None:
        self.n, self.inner = n, ToyLM()

    def __call__(self, body, ctx):
        return Reply.error(500, "warming up") if ctx.request_index < self.n else self.inner(body, ctx)


class _OddDistributions(ToyLM):
    """The toy model plus a ``/x/distributions`` that answers 200 without ``shape``."""

    def __call__(self, body, ctx):
        if ctx.path.endswith("/x/distributions"):
            return Reply(body={"token_ids": [1, 2, 3], "vocab_size": 4, "logprobs_b64": ""})
        return super().__call__(body, ctx)


@pytest.mark.slow
def test_failed_requests_are_counted_and_probe_faults_are_errors(tmp_path: Path) -> None:
    lossy = FaultInjector(ToyLM(), {"permanent_500": 0.25}, seed=3)
    with ScriptedServer(_OddDistributions()) as ref, ScriptedServer(lossy) as lossy_srv, \
            ScriptedServer(_FailFirst(12)) as hiccup, ScriptedServer(lambda b, c: Reply.error(503, "down")) as down:
        suite, records, by, progress = asyncio.run(
            _run(tmp_path, {"ref": ref, "lossy": lossy_srv, "hiccup": hiccup, "down": down}, passes=2))
        down_requests = down.request_count
    n = len(suite.cases)

    # an odd 200 distributions body: classified on every case, and the suite went on for every endpoint
    exact = [r for r in records if r.endpoint == "ref" and r.variant == "forced_exact"]
    assert exact and all(r.error_class == "malformed_response" and "shape" in r.error_message for r in exact)
    assert "kl_mean" in by["hiccup"].metrics and "kl_mean" in by["lossy"].metrics

    # a failed generation request: its case is counted as failed, never silently dropped
    lossy_res = by["lossy"]
    assert lossy.injected["permanent_500"] > 0
    assert lossy_res.counts["decode_cases_failed"] > 0
    assert lossy_res.counts["decode_cases_measured"] + lossy_res.counts["decode_cases_failed"] == n
    assert lossy_res.counts["cases_planned"] == n
    assert any("not measured because a request failed" in note for note in lossy_res.notes)

    # a 5xx during the probe: retried, so the endpoint is measured (before: every method "unsupported")
    hic = by["hiccup"]
    assert hic.counts["decode_cases_measured"] == n and hic.counts["decode_cases_failed"] == 0
    assert "probe_errors" not in hic.counts

    # a probe that keeps failing is an endpoint error, not "no logprobs", and is probed again on resume
    d = by["down"]
    assert d.counts["probe_errors"] == len(METHODS) and "kl_mean" not in d.metrics
    assert any("endpoint error, not 'no logprobs'" in note for note in d.notes)
    probes = [r for r in records if r.endpoint == "down" and r.case_id == "_probe"]
    assert sorted(r.variant for r in probes) == ["probe_failed1", "probe_failed2"]  # not reused by the second pass
    assert all(not r.ok for r in probes) and down_requests > 0

    # every result's request and error counts match the records
    for ep, res in by.items():
        mine = [r for r in records if r.endpoint == ep]
        assert res.counts["requests"] == len(mine), ep
        assert res.counts["request_errors"] == sum(not r.ok for r in mine), ep
    assert progress.errors == sum(not r.ok for r in records)


class _CappedLogprobs(ToyLM):
    """The toy model behind vLLM's ``--max-logprobs 5``: asking for more alternatives is a 400, never fewer."""

    def __call__(self, body, ctx):
        k = max(int(body.get("top_logprobs") or 0), int(body.get("logprobs") or 0)
                if not isinstance(body.get("logprobs"), bool) else 0, int(body.get("prompt_logprobs") or 0))
        if k > 5:
            return Reply.error(400, f"Requested sample logprobs of {k}, which is greater than max allowed: 5")
        return super().__call__(body, ctx)


def test_the_probe_asks_for_the_k_the_cases_use_so_a_capped_server_is_unsupported_not_failing(tmp_path) -> None:
    """A probe at K = 5 passed on such a server and then every case asking for 20 failed; probed with the cases' K,
    the logprob methods are unsupported with the server's own reason, and no case is sent to fail."""
    ref = ScriptedServer(ToyLM()).start()
    capped = ScriptedServer(_CappedLogprobs()).start()
    try:
        suite, records, results, _ = asyncio.run(_run(tmp_path, {"ref": ref, "capped": capped}))
    finally:
        ref.stop()
        capped.stop()
    probe = next(r for r in records if r.endpoint == "capped" and r.variant == "probe")
    methods = probe.extra["probe"]["methods"]
    for m in ("completions_echo", "chat_logprobs"):
        assert not methods[m]["supported"] and "greater than max allowed" in methods[m]["reason"]
    sent = [r for r in records if r.endpoint == "capped" and r.variant != "probe"]
    assert not [r for r in sent if r.status == 400]  # no case was sent only to be refused
    assert "kl_topk_lower" not in results["capped"].metrics
