"""Files named from suite text stay inside the run folder (issue 39, security).

A logprob case id became ``kl_exact/{id}.npz``; an absolute or ``../`` id wrote anywhere writable. These tests send
hostile ids through a real ``verifier run`` against the built-in engine and look for every file it wrote.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.kinds.logprob.kind import KL_SAMPLES
from verifier.run.paths import OutsideRunFolder, inside_run, safe_component

HOSTILE_IDS = ["../../escaped-rel", "../escaped-one", "/ABS", "..", ".", "", "a/../../b", "x\\..\\..\\win",
               "C:evil", "nul\x00byte", "\u202eRTL", "é" * 200, "plain-id"]


def test_safe_component_is_one_harmless_component_and_one_to_one() -> None:
    seen = {}
    for text in HOSTILE_IDS + ["%2E%2E", "%2E", "A", "a"]:
        c = safe_component(text)
        assert "/" not in c and "\\" not in c and "\x00" not in c and c not in ("", ".", "..")
        assert not c.startswith(".") and len(c) <= 140
        assert c not in seen, (text, seen.get(c))
        seen[c] = text
    assert safe_component("plain-id") == "plain-id" and safe_component("case_1.v2") == "case_1.v2"


def test_inside_run_refuses_a_planted_symlink(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "kl_exact").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", run / "kl_exact" / "suite")
    with pytest.raises(OutsideRunFolder):
        inside_run(run, "kl_exact", "suite", "case", suffix=".npz")
    assert inside_run(run, "kl_exact", "other", "../x").parent == (run / "kl_exact" / "other").resolve()


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_hostile_case_ids_through_a_real_run_write_only_inside_the_run_folder(tmp_path: Path, monkeypatch) -> None:
    from reference_engine.tiny_checkpoint import build_checkpoint

    ckpt = build_checkpoint(tmp_path / "ckpt")
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    absolute = tmp_path / "abs-escape"
    ids = [str(absolute), "../../../../../escaped-deep", "../../escaped-rel", "../escaped-one", "..", "a/../../b",
           "x\\..\\win", "plain"]
    suite = work / "logprob-hostile.jsonl"
    suite.write_text("".join(json.dumps({"id": i, "kind": "text", "prompt": f"The {n} cat sat on", "max_tokens": 3})
                             + "\n" for n, i in enumerate(ids)))
    before = _files(tmp_path)
    out = work / "run"
    res = CliRunner().invoke(app, ["run", "--reference", f"builtin:{ckpt}", "--endpoint", f"cand=builtin:{ckpt}",
                                   "--suite", f"logprob:{suite}", "--out", str(out), "--no-history", "-q"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    written = _files(tmp_path) - before
    outside = sorted(str(p) for p in written if not p.resolve().is_relative_to(out.resolve())
                     and "__pycache__" not in p.parts)
    assert outside == [], outside
    assert not absolute.with_suffix(".npz").exists() and not absolute.exists()
    npz = sorted(p.name for p in (out / "kl_exact" / "logprob-hostile").iterdir())
    # every case got its own files, inside: the greedy continuation (<id>.npz) and, since exact decode-path KL, each
    # sampled continuation through prefill, and the greedy and each sampled one through the engine's decode step
    variants = ["decode_exact", *(f"{p}exact_sample{j}" for p in ("", "decode_") for j in range(KL_SAMPLES))]
    per_variant = {v: {n for n in npz if n.endswith(f".{v}.npz")} for v in variants}
    greedy = set(npz).difference(*per_variant.values())
    assert len(npz) == len(ids) * (1 + len(variants))
    assert len(greedy) == len(ids) and all(len(names) == len(ids) for names in per_variant.values()), per_variant
    assert "plain.npz" in greedy and all(f"plain.{v}.npz" in npz for v in variants)
    # and the candidate found the reference's files again: exact KL was measured for every case
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    exact = {r["case_id"] for r in recs if r["endpoint"] == "cand" and r.get("variant") == "forced_exact"
             and r["status"] == 200 and r["error_class"] is None}
    assert exact == set(ids)
