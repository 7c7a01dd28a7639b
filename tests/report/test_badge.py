"""``verifier badge``: a well-formed, self-contained SVG drawn from the disclosure card, escaped, citing its hash."""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from pathlib import Path

from typer.testing import CliRunner

from reports.badge import render_badge
from reports.disclosure import build_cards, write_cards
from verifier.cli import app
from verifier.records import StatedClaims, SuiteManifest
from verifier.run.summary import ClaimCheck, EndpointInfo, EndpointSuiteResult, RunSummary, Verdict

EVIL = 'evil<script>alert("x")</script>&\'co'
SVG = "{http://www.w3.org/2000/svg}"


def _summary() -> RunSummary:
    fp = {"verdict": "int4-decode<b>", "distance": 0.02, "ranking": [["int4-decode<b>", 0.02], ["bf16", 1.4]]}
    claims = [ClaimCheck(claim="quantization", stated="fp8</text><text>", measured="int4-decode<b>",
                         status="contradicts", evidence="behaves like int4-decode (margin 1.38 decades of KL)"),
              ClaimCheck(claim="kv_cache", stated="fp8", status="not checked", evidence="cannot tell")]
    return RunSummary(
        run_id="20261207T000000Z", started_at="2026-12-07T00:00:00+00:00", finished_at="2026-12-07T00:01:00+00:00",
        verifier_version="0.test", reference="ref",
        endpoints=[EndpointInfo(name="ref", base_url="builtin:tiny", is_reference=True),
                   EndpointInfo(name=EVIL, base_url="http://127.0.0.1:9/v1",
                                claims=StatedClaims(quantization="fp8</text><text>", kv_cache="fp8"))],
        suites=[SuiteManifest(name="logprob-smoke", version="1", kind="logprob", case_count=7,
                              content_hash="99ece734cc03" + "0" * 52)],
        results=[EndpointSuiteResult(endpoint=EVIL, suite="logprob-smoke", kind="logprob")],
        fingerprints={EVIL: fp}, claims={EVIL: claims},
        verdicts={EVIL: Verdict(endpoint=EVIL, reference="ref", status="differs", headline="x")})


def test_svg_is_well_formed_escaped_self_contained_and_cites_the_card(tmp_path: Path) -> None:
    paths = write_cards(tmp_path, build_cards(_summary(), None, []))
    card_file = next(p for p in paths if "evil" in p.name)
    digest = hashlib.sha256(card_file.read_bytes()).hexdigest()
    code = CliRunner().invoke(app, ["badge", str(tmp_path), "--endpoint", EVIL, "--out", str(tmp_path / "b.svg")])
    assert code.exit_code == 0, code.stderr
    text = (tmp_path / "b.svg").read_text()
    root = ET.fromstring(text)  # well-formed XML, or this raises
    assert root.tag == f"{SVG}svg" and root.get("data-card-sha256") == digest
    assert "<script" not in text and "</text><text>" not in text  # data never becomes markup
    shown = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert shown[0] == f"verifier · {EVIL} vs ref: differs"
    assert shown[1] == "stated: quantization fp8</text><text> · kv cache fp8"
    assert shown[2] == "measured: behaves like int4-decode<b> (1 contradicts, 1 not checked)"
    assert shown[3] == f"2026-12-07 · suite logprob-smoke 99ece734cc03 · card sha256 {digest[:16]}"
    assert digest in (root.find(f"{SVG}title").text or "")
    assert "href" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")  # nothing external
    assert 'stroke="#c62828"' in text  # a contradicted claim colours the badge


def test_card_edited_after_the_badge_no_longer_matches_its_hash(tmp_path: Path) -> None:
    paths = write_cards(tmp_path, build_cards(_summary(), None, []))
    card_file = next(p for p in paths if "evil" in p.name)
    card = build_cards(_summary(), None, [])[1]
    svg = render_badge(card, hashlib.sha256(card_file.read_bytes()).hexdigest())
    card_file.write_text(card_file.read_text().replace('"differs"', '"consistent"'))
    assert hashlib.sha256(card_file.read_bytes()).hexdigest() not in svg


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["badge", str(tmp_path / "nope"), "--endpoint", "x", "--out", str(tmp_path / "b.svg")])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "not a run folder" in res.stderr
    res = runner.invoke(app, ["badge", str(tmp_path), "--endpoint", "x", "--out", str(tmp_path / "b.svg")])
    assert res.exit_code == 2 and "no disclosure cards" in res.stderr and "verifier report" in res.stderr
    write_cards(tmp_path, build_cards(_summary(), None, []))
    res = runner.invoke(app, ["badge", str(tmp_path), "--endpoint", "x", "--out", str(tmp_path / "b.svg")])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "--endpoint x: no such endpoint" in res.stderr
    assert not (tmp_path / "b.svg").exists()
