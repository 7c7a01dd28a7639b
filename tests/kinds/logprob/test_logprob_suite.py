"""The logprob suite end to end against scripted loopback servers running a toy LM with known distributions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from tests.kinds.kind_context import kind_context, reference_only
from verifier.kinds.logprob.estimator import exact_kl
from verifier.kinds.logprob.kind import LOGPROB_KIND
from verifier.testing import ScriptedServer

from .toy_lm import ToyLM, _tokens


def _suite_file(tmp: Path) -> Path:
    import json
    lines = [{"id": f"t{i}", "kind": "text", "prompt": p, "max_tokens": 12}
             for i, p in enumerate(["the cat of", "in one is", "you that was for", "they be at one", "a of to"])]
    lines += [{"id": "c0", "kind": "chat", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 10},
              {"id": "c1", "kind": "chat", "messages": [{"role": "user", "content": "with as his"}], "max_tokens": 10}]
    p = tmp / "toy.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines) + "{bad json\n")
    return p


async def _run(tmp: Path, servers: dict[str, ScriptedServer]):
    suite = LOGPROB_KIND.load(str(_suite_file(tmp)), {})
    assert suite.manifest.case_count == 7 and len(suite.problems) == 1 and suite.problems[0].line == 8
    names = list(servers)
    async with kind_context(tmp, {n: s.base_url for n, s in servers.items()}) as ctx:
        await LOGPROB_KIND.run(suite, reference_only(ctx))
        await LOGPROB_KIND.run(suite, ctx)
        await LOGPROB_KIND.run(suite, ctx)  # resumed: nothing sent twice
        records = ctx.store.read(suite=suite.manifest.name)
    keys = [r.key() for r in records]
    assert len(keys) == len(set(keys))
    return suite, records, LOGPROB_KIND.score(suite, records, names[0], names)


def test_logprob_suite_against_toy_models(tmp_path: Path) -> None:
    ref_lm, noisy_lm = ToyLM(), ToyLM(noise=0.6)
    with ScriptedServer(ref_lm) as a, ScriptedServer(ToyLM()) as b, ScriptedServer(noisy_lm) as c, \
            ScriptedServer(ToyLM(logprobs=False)) as d:
        suite, records, results = asyncio.run(_run(tmp_path, {"ref": a, "same": b, "noisy": c, "nolp": d}))
    by = {r.endpoint: r for r in results}
    assert by["ref"].is_reference
    same, noisy, nolp = by["same"], by["noisy"], by["nolp"]
    # identical model: KL ~ 0, same top everywhere; forced path via completions echo is the headline
    # headline = decode path (ordinary chat/completions requests); forced path kept as forced_*
    assert same.extra["headline_path"] == "decode"
    assert set(same.extra["paths"]["forced"]["methods"]) == {"completions_echo"}
    assert same.metrics["kl_mean"].value == pytest.approx(0.0, abs=1e-9)
    assert same.metrics["forced_kl_mean"].value == pytest.approx(0.0, abs=1e-9)
    assert same.metrics["same_top"].value == 1.0 and same.metrics["greedy_diverged"].value == 0.0
    assert noisy.metrics["forced_kl_mean"].value > 0.01
    assert noisy.metrics["forced_kl_mean"].n == noisy.counts["forced_positions"] > 0
    assert noisy.metrics["kl_mean"].n == noisy.counts["decode_positions"] > 0
    assert noisy.metrics["kl_mean"].low <= noisy.metrics["kl_mean"].value <= noisy.metrics["kl_mean"].high
    assert "greedy_diverged" in noisy.metrics
    for name in ("kl_median", "kl_p99", "delta_p_rms", "ln_ppl_ratio", "forced_kl_p99"):
        assert name in noisy.metrics
    # the endpoint without logprobs is reported as such, never as KL 0
    assert "kl_mean" not in nolp.metrics
    assert any(n.startswith("no logprobs") for n in nolp.notes)
    # exact KL of the toy models on the forced positions, vs the top-20 estimate (vocabulary 25: close)
    exact = []
    for r in records:
        if r.endpoint == "ref" and r.variant == "forced_echo":
            toks = _tokens(r.extra["continuation"])
            prompt = _tokens(next(c.prompt for c in suite.cases if c.id == r.case_id))
            full = prompt + toks
            for j in range(len(prompt), len(full)):
                exact.append(float(exact_kl(ref_lm.dist(full[:j])[None], noisy_lm.dist(full[:j])[None])[0]))
    assert len(exact) == noisy.counts["forced_positions"]
    assert noisy.metrics["forced_kl_mean"].value == pytest.approx(np.mean(exact), rel=0.1)
