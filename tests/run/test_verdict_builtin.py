"""A real A/A: the built-in engine against itself under another name never comes out ``differs``.

The engine decodes greedily and deterministically, so the twin's replies equal the reference's: every paired
difference is zero and its KL profile is the reference profile (bf16). With the few cases a test can afford the
verdict is ``inconclusive`` (12 cases are below the tool-call minimum of 30: "not testable"); the simulated A/A runs
(test_verdict_aa.py) count the error rate.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.run.summary import RunSummary


@pytest.mark.slow
def test_builtin_engine_against_itself_is_not_differs(tmp_path):
    out = tmp_path / "aa"
    res = CliRunner().invoke(app, ["run", "--reference", "builtin:tiny", "--endpoint", "twin=builtin:tiny",
                                   "--suite", "toolcall-smoke", "--suite", "logprob-smoke", "--limit", "12",
                                   "--out", str(out), "--no-history"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    v = summary.verdicts["twin"]
    assert v.status != "differs", v.headline
    assert v.fingerprint is not None and v.fingerprint.profile == "bf16" and not v.fingerprint.names_other
    diffs = {e.metric: e.difference.value for e in v.evidence}
    assert diffs["trigger_f1"] == 0.0 and diffs["schema_accuracy"] == 0.0, v.evidence
    # The same engine and weights: KL is float dust. Not exactly zero, nor below 1e-9: the KL now comes from the
    # teacher-forced decode path, whose float32 sums depend on how requests were batched (measured 5.7e-09); the
    # mildest other precision variant of this model sits at 2e-3 on that path (fp8-kv, suites/logprob/profiles.json).
    assert diffs["kl_mean"] < 1e-6
    # 12 cases are below the 30-unit minimum of the tool-call headlines: named, and never "consistent"
    assert v.status == "inconclusive" and "not testable: 12 cases, needs at least 30" in v.headline, v.headline
    assert f"{v.status.upper()}: {v.headline}" in res.output  # the answer is printed last by `verifier run`
