"""The logprob suite end to end against scripted loopback servers running a toy LM with known distributions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from tests.kinds.kind_context import kind_context, reference_only
from verifier.kinds.logprob.cluster_ci import MIN_CLUSTERS
from verifier.kinds.logprob.estimator import exact_kl
from verifier.kinds.logprob.kind import LOGPROB_KIND
from verifier.testing import ScriptedServer

from .toy_lm import ToyLM, _tokens

#: One more text prompt than the KL interval's minimum of clusters (prompts): the k3 interval is given
TEXTS = ["the cat of", "in one is", "you that was for", "they be at one", "a of to", "his with as", "for was that",
         "at one be", "to a of the", "is in one his", "as the cat"]
assert len(TEXTS) > MIN_CLUSTERS


def _suite_file(tmp: Path) -> Path:
    import json
    lines = [{"id": f"t{i}", "kind": "text", "prompt": p, "max_tokens": 12}
             for i, p in enumerate(TEXTS)]
    lines += [{"id": "c0", "kind": "chat", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 10},
              {"id": "c1", "kind": "chat", "messages": [{"role": "user", "content": "with as his"}], "max_tokens": 10}]
    p = tmp / "toy.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines) + "{bad json\n")
    return p


async def _run(tmp: Path, servers: dict[str, ScriptedServer]):
    suite = LOGPROB_KIND.load(str(_suite_file(tmp)), {})
    n = len(TEXTS) + 2
    assert suite.manifest.case_count == n and len(suite.problems) == 1 and suite.problems[0].line == n + 1
    names = list(servers)
    async with kind_context(tmp, {n: s.base_url for n, s in servers.items()}) as ctx:
        ctx.options["kl_samples"] = 3  # a text case's 3 samples are one cluster: the interval needs the prompts
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
    # identical model: KL ~ 0, same top everywhere. Top-k paths give lower bounds only; kl_mean is the
    # sampled-token k3 estimate (no full distributions from a provider-like server)
    assert same.extra["headline_path"] == "decode"
    assert set(same.extra["paths"]["forced"]["methods"]) == {"completions_echo"}
    assert same.extra["kl_method"] == "sampled_k3" and same.metrics["kl_mean"].method.startswith("sampled_k3")
    assert same.metrics["kl_mean"].value == pytest.approx(0.0, abs=1e-9)
    assert same.metrics["kl_topk_lower"].value == pytest.approx(0.0, abs=1e-9)
    assert same.metrics["forced_kl_topk_lower"].value == pytest.approx(0.0, abs=1e-9)
    assert same.metrics["same_top"].value == 1.0 and same.metrics["greedy_diverged"].value == 0.0
    for res in (same, noisy):  # a top-k figure is never called a mean KL
        assert "forced_kl_mean" not in res.metrics and "decode_kl_mean" not in res.metrics
    assert noisy.metrics["forced_kl_topk_lower"].value > 0.01
    assert noisy.metrics["forced_kl_topk_lower"].n == noisy.counts["forced_positions"] > 0
    assert noisy.metrics["kl_topk_lower"].n == noisy.counts["decode_positions"] > 0
    assert 0 <= noisy.metrics["kl_tail_mass"].value < 1
    assert noisy.metrics["kl_mean"].n == noisy.counts["sampled_positions"] > 0
    # three samples per text case, the case one cluster (chat cases are forced only where the template is known)
    assert noisy.counts["sampled_sequences"] == 3 * len(TEXTS)
    assert noisy.counts["sampled_prompts"] == len(TEXTS)
    assert noisy.metrics["kl_mean"].low <= noisy.metrics["kl_mean"].value <= noisy.metrics["kl_mean"].high
    assert "greedy_diverged" in noisy.metrics
    for name in ("delta_p_rms", "ln_ppl_ratio", "forced_kl_topk_lower", "sampled_kl_k1_mean"):
        assert name in noisy.metrics
    # the sampled k3 interval covers the exact KL of the toy models along the sampled continuations
    sampled_exact = []
    for r in records:
        if r.endpoint == "ref" and r.variant.startswith("forced_sample"):
            toks = _tokens(r.extra["continuation"])
            prompt = _tokens(next(c.prompt for c in suite.cases if c.id == r.case_id) or "")
            full = prompt + toks
            for j in range(len(prompt), len(full)):
                sampled_exact.append(float(exact_kl(ref_lm.dist(full[:j])[None], noisy_lm.dist(full[:j])[None])[0]))
    kl = noisy.metrics["kl_mean"]
    assert len(sampled_exact) == kl.n
    assert kl.low <= np.mean(sampled_exact) <= kl.high
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
    assert noisy.metrics["forced_kl_topk_lower"].value <= np.mean(exact) + 1e-9
