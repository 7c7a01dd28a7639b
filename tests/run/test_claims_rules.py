"""The claim rules of verifier/run/claims.py on typed summaries: precision vocabulary, margins, "not checked".

These pin the rules on figures written out by hand (fast); tests/run/test_claims_builtin.py checks them against
the built-in engine serving known variants.
"""

from __future__ import annotations

import pytest

from verifier.records import Interval, StatedClaims
from verifier.run.claims import (
    ContextProbe,
    check_claims,
    contradiction_headline,
    precision_class,
    profile_precision,
)
from verifier.run.summary import EndpointInfo, EndpointSuiteResult, RunSummary

#: the shipped library's ranking for an engine serving kv=fp8&decode_weights=int4 (logprob-smoke, measured)
RANKING = [["fp8-kv+int4-decode", 0.0231], ["int4-decode", 0.0252], ["fp8-kv", 0.5195], ["bf16", 1.4534],
           ["int4-weights", 2.0145]]
FP = {"verdict": "fp8-kv+int4-decode", "distance": 0.0231, "ranking": RANKING,
      "indistinguishable_from": ["int4-decode"]}


def _summary(claims: StatedClaims, results: list[EndpointSuiteResult] | None = None,
             fp: dict | None = None) -> RunSummary:
    return RunSummary(run_id="r", started_at="2026-12-07T00:00:00+00:00", verifier_version="t", reference="ref",
                      endpoints=[EndpointInfo(name="ref", base_url="x", is_reference=True),
                                 EndpointInfo(name="cand", base_url="y", claims=claims)],
                      suites=[], results=results or [], fingerprints={"cand": fp} if fp else {})


def _rows(summary: RunSummary, probes: dict | None = None) -> dict[str, tuple[str, str]]:
    return {c.claim: (c.status, c.evidence) for c in check_claims(summary, probes)["cand"]}


def test_vocabulary_maps_listing_labels_and_profile_names() -> None:
    assert [precision_class(x) for x in ("fp8", "FP8_E4M3", "bfloat16", "fp16", "int4", "awq", "unknown", 3)] == \
        ["fp8", "fp8", "16-bit", "16-bit", "int4", "int4", None, None]
    assert profile_precision("bf16") == {"quantization": "16-bit", "kv_cache": "16-bit", "decode_weights": "16-bit"}
    assert profile_precision("fp8-kv") == {"quantization": "16-bit", "kv_cache": "fp8", "decode_weights": "16-bit"}
    assert profile_precision("int4-decode") == {"quantization": "int4", "kv_cache": "16-bit", "decode_weights": "int4"}
    assert profile_precision("fp8-kv+int4-decode") == {"quantization": "int4", "kv_cache": "fp8",
                                                       "decode_weights": "int4"}
    assert profile_precision("int4-weights")["decode_weights"] == "int4"
    assert profile_precision("mystery-variant") is None


def test_precision_contradicts_only_beyond_the_margin() -> None:
    rows = _rows(_summary(StatedClaims(quantization="bf16", kv_cache="bf16", decode_weights="int4"), fp=FP))
    assert rows["quantization"][0] == "contradicts"
    assert rows["quantization"][1].startswith("behaves like fp8-kv+int4-decode (margin 0.50 decades of KL over fp8-kv")
    # int4-decode (KV 16-bit) is 0.002 decades behind: the fingerprint cannot say the KV cache is fp8
    assert rows["kv_cache"][0] == "not checked" and "not confident" in rows["kv_cache"][1]
    assert rows["decode_weights"][0] == "agrees"


def test_precision_not_checked_without_profiles_fingerprint_or_a_profile_of_the_stated_class() -> None:
    no_profiles = {"verdict": "no profiles", "reason": "profiles were measured on another checkpoint"}
    rows = _rows(_summary(StatedClaims(quantization="bf16"), fp=no_profiles))
    assert rows["quantization"] == ("not checked", "no calibrated precision profiles for this model and suite, so "
                                    "precision cannot be checked (profiles were measured on another checkpoint)")
    assert _rows(_summary(StatedClaims(quantization="bf16")))["quantization"][0] == "not checked"
    assert "no calibrated profile has quantization fp4" in _rows(_summary(StatedClaims(quantization="fp4"),
                                                                          fp=FP))["quantization"][1]
    unknown = {"verdict": "unknown", "distance": 0.9, "ranking": RANKING, "reason": "closest 'bf16' is 0.9 away"}
    assert _rows(_summary(StatedClaims(quantization="int4"), fp=unknown))["quantization"][0] == "not checked"
    assert _rows(_summary(StatedClaims(quantization="whatever"), fp=FP))["quantization"][0] == "not checked"


def _toolcall(counts: dict[str, int], forced_n: int) -> EndpointSuiteResult:
    return EndpointSuiteResult(endpoint="cand", suite="ts", kind="toolcall", counts=counts,
                               metrics={"forced_call_success": Interval(value=1.0, n=forced_n)} if forced_n else {})


def test_parameters_against_what_the_run_saw() -> None:
    params = StatedClaims(supported_parameters=["tools", "tool_choice", "logprobs", "response_format", "seed"])
    rows = _rows(_summary(params, [_toolcall({"tool_calls": 5, "forced:no_call": 1}, 4)]))
    assert rows["supported_parameters:tools"][0] == "agrees"
    assert rows["supported_parameters:tool_choice"] == (
        "contradicts", "tool_choice ignored in 1 of 4 forced calls (no call, or another tool than the one named)")
    assert rows["supported_parameters:logprobs"][0] == "not checked"
    assert rows["supported_parameters:response_format"][0] == "not checked"
    assert rows["supported_parameters (others)"][0] == "not checked"
    refused = EndpointSuiteResult(endpoint="cand", suite="lp", kind="logprob", extra={"probe": {
        "chat_logprobs": {"supported": False, "reason": "HTTP 400: logprobs not supported"},
        "completions_echo": {"supported": False, "reason": "HTTP 404"}}})
    assert _rows(_summary(params, [refused]))["supported_parameters:logprobs"] == (
        "contradicts", "no logprobs by any method; chat logprobs: HTTP 400: logprobs not supported")
    errored = EndpointSuiteResult(endpoint="cand", suite="lp", kind="logprob",
                                  extra={"probe": {"chat_logprobs": {"supported": False, "error": "HTTP 503"}}})
    assert _rows(_summary(params, [errored]))["supported_parameters:logprobs"][0] == "not checked"


@pytest.mark.parametrize(("cls", "stated", "status"), [
    ("near_bound", True, "agrees"), ("partial", False, "contradicts"), ("reported_zero", True, "contradicts"),
    ("reported_zero", False, "agrees"), ("not_reported", True, "not checked"), ("no_data", True, "not checked")])
def test_implicit_caching_against_the_cache_class(cls: str, stated: bool, status: str) -> None:
    res = EndpointSuiteResult(endpoint="cand", suite="c", kind="cache", extra={"cache_class": cls},
                              metrics={"cache_hit_rate": Interval(value=0.7, low=0.6, high=0.8, n=12)})
    assert _rows(_summary(StatedClaims(implicit_caching=stated), [res]))["implicit_caching"][0] == status


def test_context_length_needs_the_probe() -> None:
    s = _summary(StatedClaims(context_length=4096))
    assert "--probe-context" in _rows(s)["context_length"][1]
    refused = ContextProbe(stated=4096, target_tokens=3972, status=400, error="exceeds the context length 1024")
    assert _rows(s, {"cand": refused})["context_length"][0] == "contradicts"
    assert _rows(s, {"cand": ContextProbe(stated=4096, target_tokens=3972, prompt_tokens=3990, status=200,
                                          accepted=True)})["context_length"][0] == "agrees"
    short = ContextProbe(stated=4096, target_tokens=3972, prompt_tokens=2000, status=200, accepted=True)
    assert _rows(s, {"cand": short})["context_length"][0] == "not checked"
    flaky = ContextProbe(stated=4096, target_tokens=3972, status=503, error="server_error")
    assert _rows(s, {"cand": flaky})["context_length"][0] == "not checked"


def test_headline_names_the_first_contradiction() -> None:
    checks = check_claims(_summary(StatedClaims(quantization="bf16"), fp=FP))["cand"]
    assert contradiction_headline("cand", checks) == ("cand states bf16; behaves like fp8-kv+int4-decode (margin 0.50 "
                                                      "decades of KL over fp8-kv, the closest 16-bit profile)")
    assert contradiction_headline("cand", check_claims(_summary(StatedClaims(quantization="int4"), fp=FP))["cand"]) \
        is None


def test_claims_survive_the_manifest_for_resume(tmp_path) -> None:
    """``--resume`` without ``--config`` rebuilds endpoints from manifest.json: the stated claims come back too."""
    from verifier.http.endpoints import load_config
    from verifier.run.manifest_endpoints import endpoints_from_manifest, manifest_endpoints
    from verifier.run.store import RunManifest

    toml = tmp_path / "e.toml"
    toml.write_text('[endpoints.ref]\nbase_url = "http://127.0.0.1:9/v1"\n[endpoints.cand]\n'
                    'base_url = "http://127.0.0.1:8/v1"\nclaims = { quantization = "fp8", context_length = 4096 }\n')
    eps = load_config(toml)
    manifest = RunManifest(run_id="r", started_at="t", reference="ref", endpoints=manifest_endpoints(eps), suites=[])
    manifest.write(tmp_path)
    again = endpoints_from_manifest(RunManifest.load(tmp_path), None)
    assert again.get("cand").claims == StatedClaims(quantization="fp8", context_length=4096)
    assert again.info()[1].claims == StatedClaims(quantization="fp8", context_length=4096)
