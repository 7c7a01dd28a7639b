"""Stated claims checked against the built-in engine serving known variants (real HTTP on 127.0.0.1).

``liar`` states BF16 everywhere and a 4096-token context while serving ``kv=fp8&decode_weights=int4`` with the
tiny model's 1024; ``honest`` serves the same and states it. The shipped profile library (logprob-smoke, the whole
suite: its hash must match) names the variant; ``--probe-context`` checks the context lengths; three forced tool
calls check ``tool_choice``. A checkpoint without profiles leaves precision ``not checked``, said plainly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app

pytest.importorskip("reference_engine.launch")
tiny = pytest.importorskip("reference_engine.tiny_checkpoint")

REPO = Path(__file__).resolve().parents[2]
VARIANT = "builtin:tiny?kv=fp8&decode_weights=int4"


def _cli(args: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, args)
    return res.exit_code, res.stdout, res.stderr


def _claims(run: Path) -> dict[str, dict[str, dict]]:
    data = json.loads((run / "summary.json").read_text())
    return {ep: {c["claim"]: c for c in rows} for ep, rows in data["claims"].items()}


@pytest.mark.slow
def test_liar_contradicts_honest_agrees_on_the_engine(tmp_path: Path) -> None:
    forced = tmp_path / "forced.jsonl"  # three tool_choice-forced cases of the shipped schema suite
    forced.write_text("".join((REPO / "suites/toolcall/data/toolcall-schemas.jsonl").read_text().splitlines(True)[:3]))
    params = '["tools", "tool_choice", "logprobs"]'
    toml = tmp_path / "endpoints.toml"
    toml.write_text(
        'reference = "ref"\n[endpoints.ref]\nbase_url = "builtin:tiny"\n'
        f'[endpoints.liar]\nbase_url = "{VARIANT}"\nclaims = {{ quantization = "bf16", kv_cache = "bf16", '
        f'decode_weights = "bf16", context_length = 4096, supported_parameters = {params} }}\n'
        f'[endpoints.honest]\nbase_url = "{VARIANT}"\nclaims = {{ quantization = "int4", kv_cache = "fp8-e4m3", '
        f'decode_weights = "int4", context_length = 1024, supported_parameters = {params} }}\n')
    run = tmp_path / "run"
    code, out, err = _cli(["run", "--config", str(toml), "--suite", "logprob-smoke", "--suite", str(forced),
                           "--probe-context", "--out", str(run), "--no-history", "-q"])
    print(out, err)
    assert code == 0, err
    claims = _claims(run)
    liar, honest = claims["liar"], claims["honest"]
    for name in ("quantization", "decode_weights"):
        assert liar[name]["status"] == "contradicts" and liar[name]["measured"] == "fp8-kv+int4-decode"
        assert honest[name]["status"] == "agrees"
    # fp8-kv+int4-decode and int4-decode (16-bit KV) are within the fingerprint's margin on this suite: the KV
    # cache claim cannot be settled either way, and saying "agrees" or "contradicts" would overclaim
    assert liar["kv_cache"]["status"] == honest["kv_cache"]["status"] == "not checked"
    assert liar["context_length"]["status"] == "contradicts" and "context length 1024" in liar["context_length"][
        "evidence"]
    assert honest["context_length"]["status"] == "agrees" and honest["context_length"]["measured"] >= 0.9 * 1024
    for ep in (liar, honest):
        assert ep["supported_parameters:tool_choice"]["status"] == "agrees"
        assert ep["supported_parameters:tool_choice"]["measured"] == "obeyed 3 of 3"
        assert ep["supported_parameters:logprobs"]["status"] == "agrees"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdicts"]["liar"]["headline"].startswith(
        "liar states bf16; behaves like fp8-kv+int4-decode (margin ")
    assert not summary["verdicts"]["honest"]["headline"].startswith("honest states")
    card = json.loads((run / "disclosure-liar.json").read_text())
    assert [c["status"] for c in card["claims"]][:3] == ["contradicts", "not checked", "contradicts"]


@pytest.mark.slow
def test_model_without_profiles_is_not_checked(tmp_path: Path) -> None:
    ckpt = tiny.build_checkpoint(tmp_path / "ckpt", "llama", hidden=64, intermediate=128, layers=1, vocab=512,
                                 std=0.3, seed=3)
    toml = tmp_path / "endpoints.toml"
    toml.write_text(f'reference = "ref"\n[endpoints.ref]\nbase_url = "builtin:{ckpt}"\n'
                    f'[endpoints.cand]\nbase_url = "builtin:{ckpt}?kv=fp8"\nclaims = {{ quantization = "bf16" }}\n')
    run = tmp_path / "run"
    code, out, err = _cli(["run", "--config", str(toml), "--suite", "logprob-smoke", "--limit", "2", "--out",
                           str(run), "--no-history", "-q"])
    assert code == 0, err
    row = _claims(run)["cand"]["quantization"]
    assert row["status"] == "not checked"
    assert row["evidence"].startswith("no calibrated precision profiles for this model and suite")
