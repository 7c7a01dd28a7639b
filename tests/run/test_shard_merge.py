"""``verifier run --shard I/N`` and ``verifier merge``: real runs against one loopback scripted server.

The server answers from the request body alone (tool-call ids included, see :func:`same_answers`), so the
whole run and the shards get identical answers whichever run asks, and the merged summary must then equal the
whole run's in every count and answer-derived metric. What legitimately differs is listed in ``NOT_COMPARED``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.kinds.logprob.toy_lm import ToyLM  # a toy LM whose logprobs are known
from verifier.cli import app
from verifier.records import ExchangeRecord
from verifier.run.registry import load_suite
from verifier.run.shard import Shard, ShardSpecError, shard_of, shard_suite
from verifier.run.store import RunManifest
from verifier.testing import Reply, RequestContext, ScriptedServer, schema_responder

CORE = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"
N = 3

#: Summary fields that differ between two runs getting the same answers: identity, clock, and timing metrics
#: (latency and tokens/s measure the sends, not the answers); ``merged_from`` and ``progress`` say how it ran.
NOT_COMPARED_TOP = ("run_id", "started_at", "finished_at", "timings")
TIMING_METRICS = ("latency_p50_s", "latency_p95_s", "latency_p99_s", "tokens_per_s")


def same_answers(body: dict, ctx: RequestContext) -> Reply:
    """schema_responder with tool-call ids from the body hash (not the arrival index), so an agent conversation
    sent by any run is byte-identical at every step and gets the same answers."""
    reply = schema_responder(body, ctx)
    for i, tc in enumerate(reply.tool_calls or []):
        tc["id"] = f"call_{ctx.body_hash[:12]}_{i}"
    return reply


class Answers:
    """Tool-call, agent and cache requests get :func:`same_answers`; logprob requests (legacy completions, chat
    asking for logprobs) a toy LM with known distributions, so the logprob suite yields real KL figures."""

    def __init__(self, lm: ToyLM) -> None:
        self.lm = lm

    def __call__(self, body: dict, ctx: RequestContext) -> Reply:
        if not ctx.path.endswith("/chat/completions") or body.get("logprobs"):
            return self.lm(body, ctx)
        return same_answers(body, ctx)


def invoke(args: list[str]) -> Any:
    return CliRunner().invoke(app, args, catch_exceptions=False)


def one_line_error(res: Any) -> str:
    lines = [ln for ln in (res.stderr or res.output).splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One whole run and its N shards (toolcall + agent + cache + logprob suites), shared by the tests here."""
    root = tmp_path_factory.mktemp("shards")
    suite = root / "tc.jsonl"
    suite.write_text("\n".join(CORE.read_text().splitlines()[:24]) + "\n")
    ref_srv = ScriptedServer(Answers(ToyLM())).start()
    cand_srv = ScriptedServer(Answers(ToyLM(noise=0.6))).start()  # a "quantized" twin: KL > 0
    try:
        def run(out: str, *more: str) -> Any:
            args = ["run", "--reference", f"ref={ref_srv.base_url}", "--endpoint", f"cand={cand_srv.base_url}",
                    "--suite", str(suite), "--suite", "agent-smoke", "--suite", "cache-smoke",
                    "--suite", "logprob-smoke", "--limit", "24", "--horizon", "10", "--out", str(root / out),
                    "--db", str(root / "history.sqlite"), "--quiet", *more]
            res = invoke(args)
            assert res.exit_code == 0, res.output
            return res

        run("whole")
        for i in range(1, N + 1):
            run(f"shard{i}", "--shard", f"{i}/{N}")
        yield {"root": root, "suite": suite, "run": run,
               "shards": [root / f"shard{i}" for i in range(1, N + 1)]}
    finally:
        ref_srv.stop()
        cand_srv.stop()


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary minus what two runs with the same answers may differ in (see the module docstring)."""
    s = {k: v for k, v in summary.items() if k not in NOT_COMPARED_TOP}
    s["settings"] = {k: v for k, v in s["settings"].items() if k not in ("progress", "merged_from", "shard")}
    for r in s["results"]:
        r["metrics"] = {k: v for k, v in r["metrics"].items() if k not in TIMING_METRICS}
        r["comparisons"] = {k: v for k, v in r.get("comparisons", {}).items() if k != "latency_mean_s"}
        # examples are listed in record order (completion order in a whole run): compare them as a set
        r["disagreements"] = sorted(r.get("disagreements", []), key=lambda d: json.dumps(d, sort_keys=True))
    return s


def records(run_dir: Path) -> dict[tuple, ExchangeRecord]:
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    return {r.key(): r for r in (ExchangeRecord.model_validate_json(x) for x in lines)}


@pytest.mark.slow
def test_sharded_and_merged_run_equals_the_whole_run(runs: dict[str, Any]) -> None:
    root = runs["root"]
    whole = json.loads((root / "whole" / "summary.json").read_text())
    # each shard ran a non-empty, disjoint part of the tool-call suite, and its manifest says which shard it is
    per_shard = []
    for i, d in enumerate(runs["shards"], 1):
        assert RunManifest.load(d).settings["shard"] == f"{i}/{N}"
        per_shard.append({k[1] for k in records(d) if k[0] == "tc"})
    assert all(per_shard) and sum(map(len, per_shard)) == len(set().union(*per_shard)) == 24

    res = invoke(["merge", *map(str, runs["shards"]), "--out", str(root / "merged"),
                  "--db", str(root / "history.sqlite")])
    assert res.exit_code == 0, res.output
    merged_dir = root / "merged"
    assert {"manifest.json", "records.jsonl", "summary.json", "report.html"} <= {p.name for p in merged_dir.iterdir()}
    merged = json.loads((merged_dir / "summary.json").read_text())
    assert [m["shard"] for m in merged["settings"]["merged_from"]] == ["1/3", "2/3", "3/3"]
    assert "shard" not in merged["settings"] and RunManifest.load(merged_dir).status == "completed"
    assert comparable(merged) == comparable(whole)

    # every suite kind is in there, with real counts (not an empty comparison)
    counts = {(r["suite"], r["endpoint"]): r["counts"] for r in merged["results"]}
    assert counts[("tc", "cand")]["exchanges"] == 24 and counts[("tc", "cand")]["tool_calls"] > 0
    # the reference's second answers (all 24 cases: fewer than 50), split by shard and joined again
    assert counts[("tc", "ref")]["reference_repeat_exchanges"] == 24
    assert counts[("agent-smoke", "ref")]["trials"] >= 2 and counts[("cache-smoke", "cand")]["sessions"] >= 2
    assert {r["suite"] for r in merged["results"]} == {"tc", "agent-smoke", "cache-smoke", "logprob-smoke"}
    kl = next(r for r in merged["results"] if r["suite"] == "logprob-smoke" and r["endpoint"] == "cand")
    assert kl["metrics"]["kl_mean"]["value"] > 0 and kl["metrics"]["kl_mean"]["n"] > 0

    # the merged records are the whole run's exchanges with the same answers, each once
    want, got = records(root / "whole"), records(merged_dir)
    assert set(got) == set(want)
    for key, rec in want.items():
        assert (got[key].content, got[key].tool_calls, got[key].status) == (rec.content, rec.tool_calls,
                                                                            rec.status), key


def test_shard_assignment_is_stable_when_cases_are_appended(tmp_path: Path) -> None:
    lines = CORE.read_text().splitlines()
    small, grown = tmp_path / "small.jsonl", tmp_path / "grown.jsonl"
    small.write_text("\n".join(lines[:40]) + "\n")
    grown.write_text("\n".join(lines[:90]) + "\n")
    owners: dict[str, dict[str, int]] = {}
    for path in (small, grown):
        kind, suite = load_suite(str(path), {})
        owners[path.stem] = {}
        for i in range(1, N + 1):
            for case in shard_suite(kind, suite, Shard(i, N)).cases:
                assert case.id not in owners[path.stem], "a case in two shards"
                owners[path.stem][case.id] = i
        assert set(owners[path.stem]) == {c.id for c in suite.cases}, "a case in no shard"
        assert shard_suite(kind, suite, Shard(1, N)).manifest == suite.manifest  # still names the whole suite
    assert all(owners["grown"][cid] == i for cid, i in owners["small"].items())
    assert len(set(owners["grown"].values())) == N
    # an agent suite is sharded by scenario, every trial of a scenario in the one shard that owns it
    kind, agent = load_suite("agent-long", {})
    parts = [shard_suite(kind, agent, Shard(i, N)).cases for i in range(1, N + 1)]
    assert sorted(s.id for p in parts for s in p) == sorted(s.id for s in agent.cases)
    assert all(shard_of(s.id, N) == i for i, p in enumerate(parts, 1) for s in p)


@pytest.mark.parametrize("spec", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2"])
def test_bad_shard_value_is_one_line_exit_2(spec: str, tmp_path: Path) -> None:
    with pytest.raises(ShardSpecError):
        Shard.parse(spec)
    res = invoke(["run", "--suite", str(CORE), "--reference", "http://127.0.0.1:9/v1", "--shard", spec,
                  "--out", str(tmp_path / "x"), "--quiet"])
    assert res.exit_code == 2 and "--shard" in one_line_error(res)
    assert not (tmp_path / "x").exists()


def _edited_copy(src: Path, dst: Path, edit: Any) -> Path:
    shutil.copytree(src, dst)
    data = json.loads((dst / "manifest.json").read_text())
    edit(data)
    (dst / "manifest.json").write_text(json.dumps(data))
    return dst


@pytest.mark.slow
def test_merge_refuses_shards_that_do_not_make_one_run(runs: dict[str, Any], tmp_path: Path) -> None:
    s1, s2, s3 = map(str, runs["shards"])
    whole = str(runs["root"] / "whole")

    def refused(*dirs: str) -> str:
        out = tmp_path / "out"
        res = invoke(["merge", *dirs, "--out", str(out), "--no-history"])
        assert res.exit_code == 2, res.output
        assert not out.exists() or not any(out.iterdir())
        return one_line_error(res)

    assert "missing shard(s) 3/3" in refused(s1, s2)
    assert "given twice" in refused(s1, s2, s3, s1)
    copy1 = shutil.copytree(s1, tmp_path / "copy1")
    assert "shard 1/3 given twice" in refused(s1, str(copy1), s2, s3)
    assert "not a shard run" in refused(whole, s1, s2, s3)
    assert "no manifest.json" in refused(str(tmp_path / "nope"), s1)

    other_n = _edited_copy(runs["shards"][2], tmp_path / "n4", lambda m: m["settings"].update(shard="3/4"))
    assert "different shard counts" in refused(s1, s2, str(other_n))
    other_suite = _edited_copy(runs["shards"][2], tmp_path / "suite",
                               lambda m: m["suites"][0]["manifest"].update(content_hash="0" * 64))
    assert "different suites" in refused(s1, s2, str(other_suite))
    other_model = _edited_copy(runs["shards"][2], tmp_path / "model",
                               lambda m: m["endpoints"][1].update(model="another-model"))
    assert "different endpoints" in refused(s1, s2, str(other_model))
    other_settings = _edited_copy(runs["shards"][2], tmp_path / "seed", lambda m: m["settings"].update(seed=7))
    assert "different settings: seed: 0 vs 7" in refused(s1, s2, str(other_settings))
    unfinished = _edited_copy(runs["shards"][2], tmp_path / "running", lambda m: m.update(status="running"))
    assert "did not complete" in refused(s1, s2, str(unfinished))

    # overlapping work: shard 3's folder also holding shard 1's case records
    overlap = shutil.copytree(s3, tmp_path / "overlap")
    with open(overlap / "records.jsonl", "a") as fh:
        fh.write((Path(s1) / "records.jsonl").read_text())
    assert "overlapping shards" in refused(s1, s2, str(overlap))

    # an output folder that is not empty is refused like verifier run's
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    res = invoke(["merge", s1, s2, s3, "--out", str(busy), "--no-history"])
    assert res.exit_code == 2 and "not empty" in one_line_error(res)


@pytest.mark.slow
def test_resume_keeps_the_shard_it_started_with(runs: dict[str, Any]) -> None:
    res = invoke(["run", "--resume", str(runs["shards"][0]), "--shard", "2/3", "--quiet"])
    assert res.exit_code == 2 and "--shard 1/3" in one_line_error(res)


def test_endpoint_identity_ignores_builtin_ports_and_pacing_only() -> None:
    from verifier.run.merge import _endpoint_identity
    from verifier.run.store import ManifestEndpoint

    def ep(**kw: Any) -> dict[str, Any]:
        base = {"name": "fp8", "source": "builtin:tiny?kv=fp8", "base_url": "http://127.0.0.1:40001/v1",
                "model": "tiny"}
        return _endpoint_identity(ManifestEndpoint(**{**base, **kw}))

    # a built-in engine gets a new port each run; rate and concurrency change how fast, not what is asked
    assert ep() == ep(base_url="http://127.0.0.1:40002/v1") == ep(rate=2.0, concurrency=1)
    assert ep() != ep(source="builtin:tiny") and ep() != ep(model="other") and ep() != ep(timeout=5.0)
    url = {"source": "https://a.example/v1", "base_url": "https://a.example/v1"}
    assert ep(**url) != ep(source="https://b.example/v1", base_url="https://b.example/v1")
