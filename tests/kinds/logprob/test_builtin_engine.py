"""Logprob and cache suites against the real built-in engine (a tiny random checkpoint, on CPU).

Exact KL through the distributions extension: BF16 vs BF16 is 0, FP8 KV is > 0; the top-k estimate's error
against exact KL at k = 5, 10, 20 is computed on these real distributions. Prefix caching on -> real hits,
off -> reported zero (not absent).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from tests.kinds.kind_context import kind_context, reference_only
from verifier.kinds.cache.kind import CACHE_KIND
from verifier.kinds.logprob.cluster_ci import MIN_CLUSTERS
from verifier.kinds.logprob.kind import LOGPROB_KIND
from verifier.kinds.logprob.scoring import PathData, _decode, _sampled_exact, decode_vs_forced
from verifier.kinds.logprob.tracks import generation_track
from verifier.run.paths import inside_run

launch = pytest.importorskip("reference_engine.launch")
tiny = pytest.importorskip("reference_engine.tiny_checkpoint")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny.build_checkpoint(tmp_path_factory.mktemp("kl-ckpt"), "llama", hidden=128, intermediate=256, layers=2,
                                 vocab=512,
                                 max_pos=2048, std=0.3, seed=3)


async def _run_kind(kind, suite, tmp: Path, urls: dict[str, str], twice_ref: bool) -> tuple[dict, list]:
    names = list(urls)
    async with kind_context(tmp, urls, model=None, max_attempts=2, concurrency=4, preflight=True) as ctx:
        if twice_ref:
            await kind.run(suite, reference_only(ctx))
        await kind.run(suite, ctx)
        records = ctx.store.read(suite=suite.manifest.name)
    return {r.endpoint: r for r in kind.score(suite, records, names[0], names)}, records


def _forced_matches_generated(recs: dict, ids: list[str], run_dir: Path, checkpoint: Path) -> dict[str, int]:
    """Per case, how many leading tokens of the reference's greedy generation the forced decode path reproduces.

    The forced path re-tokenizes the continuation's text. This random checkpoint often emits a partial UTF-8 byte
    or a merge BPE would not produce (``"\\n  "`` as one token), which the text does not give back: after such a
    token the forced rows condition on other tokens than the decode path's positions, so only the positions before
    it are the same contexts."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    out: dict[str, int] = {}
    for cid in ids:
        saved = inside_run(run_dir, "kl_exact", "logprob-smoke", cid, suffix=".decode_exact.npz")
        rec = recs.get(("bf16", cid, "generate"))
        if not saved.is_file() or rec is None:
            continue
        z = np.load(saved)
        forced = [tok.decode([int(i)]) for i in z["token_ids"][int(z["start"]):]]
        generated = [p.token for p in generation_track(rec).positions]
        n = 0
        while n < min(len(forced), len(generated)) and forced[n] == generated[n] and "\ufffd" not in forced[n]:
            n += 1
        out[cid] = n
    return out


def _truncated(data: PathData, keep: dict[str, int]) -> PathData:
    """``data`` with each case's positions cut to ``keep[case]`` (cases not in ``keep`` or with none left dropped)."""
    out = PathData()  # decode_vs_forced reads case ids and lower bounds only
    for cid, low in zip(data.case_ids, data.lower):
        if keep.get(cid, 0):
            out.case_ids.append(cid)
            out.lower.append(low[:keep[cid]])
    return out


@pytest.mark.slow
def test_logprob_exact_on_engine(checkpoint: Path, tmp_path: Path) -> None:
    suite = LOGPROB_KIND.load("logprob-smoke", {})
    with launch.start_server(checkpoint) as ref, launch.start_server(checkpoint) as same, \
            launch.start_server(checkpoint, weights="int4") as int4, launch.start_server(checkpoint,
                                                                                         kv_dtype="fp8") as fp8:
        res, records = asyncio.run(_run_kind(LOGPROB_KIND, suite, tmp_path,
                                    {"bf16": ref.base_url, "bf16-again": same.base_url, "int4": int4.base_url,
                                     "fp8-kv": fp8.base_url}, True))
    assert res["bf16"].extra["probe"]["exact"]["supported"]
    assert res["bf16"].extra["probe"]["exact_decode"]["supported"]
    same_r, int4_r, fp8_r = res["bf16-again"], res["int4"], res["fp8-kv"]
    for r in (same_r, int4_r, fp8_r):
        assert set(r.extra["paths"]["forced"]["methods"]) == {"exact"}
        # kl_mean: exact distributions along the reference's sampled continuations, forced through DECODE
        assert r.extra["kl_method"] == "exact" and r.extra["kl_path"] == "sampled_decode_exact"
        assert r.extra["kl_computation"] == "decode" and "kl_mean_withheld" not in r.extra
        assert r.metrics["kl_mean"] == r.metrics["sampled_decode_exact_kl_mean"]
        n_seq = r.counts["sampled_decode_exact_sequences"]
        assert n_seq == r.counts["sampled_sequences"] > 0
        prompts = r.counts["sampled_decode_exact_prompts"]  # the interval's clusters: a case's samples are one
        assert 0 < prompts <= n_seq and (r.metrics["kl_mean"].low is not None) == (prompts >= MIN_CLUSTERS)
        assert r.counts["decode_exact_sequences"] > 0  # the greedy continuation, every position, beside it
        assert r.metrics["kl_mean"].method.startswith("exact") and "decode_kl_mean" not in r.metrics
    # FP8 KV is read back only when decoding: teacher-forced (prefill) KL is 0, forced DECODE KL is not
    assert fp8_r.metrics["sampled_exact_kl_mean"].value == pytest.approx(0.0, abs=1e-9)
    assert fp8_r.metrics["kl_mean"].value > 1e-6
    assert same_r.metrics["kl_mean"].value == pytest.approx(0.0, abs=1e-6)
    assert same_r.metrics["same_top"].value == 1.0
    assert int4_r.metrics["kl_mean"].value > 1e-5 and int4_r.metrics["kl_mean"].n > 20
    assert int4_r.metrics["forced_kl_mean"].value > 1e-5  # exact on the greedy continuation, kept beside it
    # FP8 KV changes only what is read back from the paged cache: the decode path's top-k lower bound sees it
    assert fp8_r.metrics["kl_topk_lower"].value > 1e-6
    # on the positions the greedy decode path compares (same contexts), exact decode KL is above its top-k bound
    recs = {(r.endpoint, r.case_id, r.variant or ""): r for r in records}
    ids = [c.id for c in suite.cases]
    same_text = _forced_matches_generated(recs, ids, tmp_path, checkpoint)
    for ep in ("int4", "fp8-kv"):
        cmp = decode_vs_forced(_truncated(_decode(recs, ids, "bf16", ep), same_text),
                               _sampled_exact(recs, ids, "bf16", ep, prefix="decode_exact", whole=True))
        assert cmp is not None and cmp[2] > 0 and cmp[1] >= cmp[0] - 1e-4, (ep, cmp, same_text)
    # the sampled-token k3 estimate rides along (a cross-check of the exact figure on sampled text)
    assert int4_r.metrics["sampled_kl_k3_mean"].value > 0 and int4_r.counts["sampled_sequences"] > 0
    print(f"fp8-kv: exact (prefill) KL {fp8_r.metrics['sampled_exact_kl_mean'].value:.3e}, exact (decode) KL "
          f"{fp8_r.metrics['kl_mean'].value:.3e}, decode top-k lower bound "
          f"{fp8_r.metrics['kl_topk_lower'].value:.3e}; "
          f"int4: exact KL {int4_r.metrics['kl_mean'].value:.3e}, sampled k3 "
          f"{int4_r.metrics['sampled_kl_k3_mean'].value:.3e}, "
          f"decode top-k lower bound {int4_r.metrics['kl_topk_lower'].value:.3e}")
    table = int4_r.extra["topk_error_vs_exact"]
    print("top-k estimate vs exact KL on engine distributions (int4 weights vs bf16):")
    for k in ("5", "10", "20"):
        row = table[k]
        print(f"  k={k}: exact mean {row['exact_mean']:.3e} estimate {row['estimate_mean']:.3e} "
              f"lower {row['lower_mean']:.3e} mean|err| {row['mean_abs_error']:.3e} "
              f"rel.err(mean) {row['relative_error_of_mean']:.3f}")
        assert row["lower_mean"] <= row["exact_mean"] * (1 + 1e-6) + 1e-12
    assert table["20"]["mean_abs_error"] <= table["5"]["mean_abs_error"]


@pytest.mark.parametrize("prefix_cache", [True, False])
@pytest.mark.slow
def test_cache_on_engine(checkpoint: Path, tmp_path: Path, prefix_cache: bool) -> None:
    suite = CACHE_KIND.load("cache-smoke", {"limit": 4, "tokenizer": str(checkpoint)})
    with launch.start_server(checkpoint, prefix_cache=prefix_cache) as srv:
        res, _ = asyncio.run(_run_kind(CACHE_KIND, suite, tmp_path, {"engine": srv.base_url}, False))
    r = res["engine"]
    # the engine bills exactly the tokens of the rendered prompt
    acc = r.extra["token_accounting"]
    assert acc["n"] == 16 and acc["exact"] == 16
    if prefix_cache:
        assert r.extra["cache_class"] in ("near_bound", "partial")
        assert r.metrics["cache_hit_rate"].value > 0.3
    else:
        assert r.extra["cache_class"] == "reported_zero"
        assert r.metrics["cache_hit_rate"].value == 0.0


@pytest.mark.slow
def test_decode_path_keeps_the_first_divergent_position(checkpoint: Path, tmp_path: Path) -> None:
    """INT4 decode weights: greedy outputs diverge; the divergent position (same prefix on both sides) is
    compared, with the rest of the common prefix; dropping it biased the decode-path KL low."""
    from verifier.kinds.logprob.align import common_prefix
    from verifier.kinds.logprob.tracks import generation_track

    suite = LOGPROB_KIND.load("logprob-smoke", {})
    with launch.start_server(checkpoint) as ref, launch.start_server(checkpoint, decode_weights="int4") as cand:
        urls = {"bf16": ref.base_url, "int4-decode": cand.base_url}
        async def go():
            async with kind_context(tmp_path, urls, model=None, max_attempts=2, concurrency=4, preflight=True) as ctx:
                ctx.options["kl_samples"] = 1
                await LOGPROB_KIND.run(suite, reference_only(ctx))
                await LOGPROB_KIND.run(suite, ctx)
                return ctx.store.read(suite=suite.manifest.name)
        records = asyncio.run(go())
    res = {r.endpoint: r for r in LOGPROB_KIND.score(suite, records, "bf16", list(urls))}["int4-decode"]
    gens = {(r.endpoint, r.case_id): generation_track(r) for r in records if r.variant == "generate" and r.ok}
    expected, diverged = 0, 0
    for c in suite.cases:
        rt, ct = gens[("bf16", c.id)], gens[("int4-decode", c.id)]
        m = common_prefix(rt, ct)
        if m < min(len(rt.positions), len(ct.positions)):
            diverged += 1
            expected += m + 1  # the common prefix and the divergent position
        else:
            expected += m
    assert diverged > 0, "int4 decode weights should change some greedy output of a random checkpoint"
    assert res.counts["decode_positions"] == expected
    assert res.metrics["kl_topk_lower"].n == expected and res.metrics["kl_topk_lower"].value > 0
    # decode-only quantization: prefill (teacher-forced) KL is exactly 0; forced DECODE measures it at every position
    assert res.metrics["forced_kl_mean"].value == pytest.approx(0.0, abs=1e-9)
    assert res.extra["kl_computation"] == "decode" and "kl_mean_withheld" not in res.extra
    assert res.metrics["decode_exact_kl_mean"].value > res.metrics["kl_topk_lower"].value > 0
    assert res.counts["decode_exact_positions"] > res.counts["decode_positions"]  # past the first divergence
    # without the forced-decode extension (an API like a remote one), the prefill figure is still withheld
    remote_like = [r for r in records if not (r.variant or "").startswith("decode_exact")]
    res = {r.endpoint: r for r in LOGPROB_KIND.score(suite, remote_like, "bf16", list(urls))}["int4-decode"]
    assert "kl_mean" not in res.metrics and "decode path" in res.extra["kl_mean_withheld"]


@pytest.mark.slow
def test_the_reference_is_asked_for_a_prompts_tokens_once_per_prompt(checkpoint: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Every exact variant of a case (greedy and sampled continuations, through prefill and decode) starts where the
    same prompt ends: the reference prefills that prompt once to learn its tokens, not once per variant."""
    from verifier.http.client import EndpointClient

    suite = LOGPROB_KIND.load("logprob-smoke", {"limit": 2})
    asked: list[str] = []
    post_json = EndpointClient.post_json

    async def counting(self, path: str, body: dict, *args, **kwargs):
        if path == "/x/distributions" and body.get("prompt") is not None:
            asked.append(body["prompt"])
        return await post_json(self, path, body, *args, **kwargs)

    monkeypatch.setattr(EndpointClient, "post_json", counting)
    with launch.start_server(checkpoint) as ref:
        async def go() -> list:
            async with kind_context(tmp_path, {"bf16": ref.base_url}, model=None, max_attempts=2,
                                    preflight=True) as ctx:
                ctx.options["kl_samples"] = 2
                await LOGPROB_KIND.run(suite, ctx)
                return ctx.store.read(suite=suite.manifest.name)
        records = asyncio.run(go())
    exact = [r for r in records if r.ok and (r.variant or "").startswith(("forced_exact", "decode_exact", "exact_"))]
    assert len(exact) == len(suite.cases) * 2 * 3      # prefill and decode, greedy and 2 samples, every case
    assert all(c.kind == "text" for c in suite.cases)
    assert [asked.count(c.prompt) for c in suite.cases] == [1] * len(suite.cases)
