"""The import -> run -> badge flow end to end on loopback: a stand-in OpenRouter routes each pinned provider to an
engine variant, the imported file is run as is, and the badge cites the card of the run.

Providers (tests/cli/data/openrouter_endpoints.json): ``verifier`` (first party, BF16), ``cheaphost/bf16`` (states
bf16 and 4096 tokens, serves kv=fp8 + int4 decode with 1024), ``honestquant/int4`` (states int4, serves int4
decode), ``mystery`` (no quantization label, serves BF16).
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.testing.openrouter_stub import OpenRouterStub

launch = pytest.importorskip("reference_engine.launch")

FIXTURE = Path(__file__).resolve().parent / "data" / "openrouter_endpoints.json"
ENV = {"OPENROUTER_API_KEY": "sk-or-loopback-key"}


def _cli(args: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, args, env=ENV)
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.slow
def test_import_run_badge_on_loopback(tmp_path: Path) -> None:
    with launch.start_server() as bf16, launch.start_server(kv_dtype="fp8", decode_weights="int4") as cheap, \
            launch.start_server(decode_weights="int4") as int4d, launch.start_server() as mystery, \
            OpenRouterStub(json.loads(FIXTURE.read_text()), {
                "verifier": bf16.base_url, "cheaphost/bf16": cheap.base_url,
                "honestquant/int4": int4d.base_url, "mystery": mystery.base_url}) as stub:
        toml, run, svg = tmp_path / "endpoints.toml", tmp_path / "run", tmp_path / "badge.svg"
        code, out, err = _cli(["endpoints", "import", "openrouter", "verifier/tiny-chat", "--api-base", stub.api_base,
                               "--out", str(toml)])
        assert code == 0, err
        code, out, err = _cli(["run", "--config", str(toml), "--suite", "logprob-smoke", "--probe-context",
                               "--out", str(run), "--no-history", "-q"])
        print(out, err)
        assert code == 0, err
        # every request went to the provider its endpoint is pinned to
        assert {tag for tag, _ in stub.requests} == {"verifier", "cheaphost/bf16", "honestquant/int4", "mystery"}
        code, out, err = _cli(["badge", str(run), "--endpoint", "cheaphost-bf16", "--out", str(svg)])
        assert code == 0, err
    summary = json.loads((run / "summary.json").read_text())
    claims = {ep: {c["claim"]: c for c in rows} for ep, rows in summary["claims"].items()}
    assert claims["cheaphost-bf16"]["quantization"]["status"] == "contradicts"
    assert claims["cheaphost-bf16"]["context_length"]["status"] == "contradicts"
    assert claims["honestquant-int4"]["quantization"]["status"] == "agrees"
    assert claims["honestquant-int4"]["context_length"]["status"] == "agrees"
    assert "quantization" not in claims["mystery"]  # no label listed: nothing stated, nothing judged
    assert claims["verifier"]["quantization"]["status"] == "not checked"  # the reference is the yardstick
    assert summary["verdicts"]["cheaphost-bf16"]["headline"].startswith("cheaphost-bf16 states bf16; behaves like ")
    assert "sk-or-loopback-key" not in (run / "summary.json").read_text()
    root = ET.fromstring(svg.read_text())
    card = run / "disclosure-cheaphost-bf16.json"
    assert root.get("data-card-sha256") == hashlib.sha256(card.read_bytes()).hexdigest()
    assert json.loads(card.read_text())["claims"][0]["status"] == "contradicts"
