"""Fingerprint: profiles of the engine's precision variants, measured then recognised in a second run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from verifier.kinds.logprob.fingerprint import KLProfile, ProfileLibrary, make_profile, match
from verifier.run.calibrate import build_library

tiny = pytest.importorskip("reference_engine.tiny_checkpoint")


def test_match_and_unknown() -> None:
    rng = np.random.default_rng(0)
    lib = ProfileLibrary(suite="s", suite_hash="h", profiles={
        "small": make_profile({"decode": (rng.exponential(1e-3, 500), None)}),
        "large": make_profile({"decode": (rng.exponential(1e-1, 500), None)})})
    assert match(make_profile({"decode": (rng.exponential(1.2e-3, 400), None)}), lib, suite_hash="h").verdict == "small"
    far = match(make_profile({"decode": (rng.exponential(10.0, 400), None)}), lib, suite_hash="h")
    assert far.verdict == "unknown" and far.distance > far.threshold
    assert match(KLProfile(), None).verdict == "no profiles"
    assert match(lib.profiles["small"], lib, suite_hash="other").verdict == "no profiles"


@pytest.mark.slow
def test_engine_variants_recognised_as_themselves(tmp_path: Path) -> None:
    ckpt = tiny.build_checkpoint(tmp_path / "ckpt", "llama", hidden=128, intermediate=256, layers=2, vocab=512,
                                 std=0.3, seed=5)
    profiles = tmp_path / "profiles.json"
    opts = {"limit": 4}
    lib = build_library(str(ckpt), "logprob-smoke", profiles, tmp_path / "run1", options=opts)
    assert set(lib.profiles) == {"bf16", "fp8-kv", "int4-weights", "int4-decode", "fp8-kv+int4-decode"}
    from verifier.http.endpoints import from_flags
    from verifier.run.runner import RunSettings, execute_run

    def url(o: str) -> str:
        return f"builtin:{ckpt}" + (f"?{o}" if o else "")

    eps = from_flags(f"reference={url('')}", [f"fp8-kv={url('kv=fp8')}", f"int4-weights={url('weights=int4')}",
                                              f"int4-decode={url('decode_weights=int4')}"])
    out = execute_run(RunSettings(suites=["logprob-smoke"], endpoints=eps, out=tmp_path / "run2",
                                  display_progress=False,
                                  options={**opts, "kl_profiles": str(profiles)}))
    for r in out.summary.results:
        if r.is_reference:
            continue
        fp = r.extra["fingerprint"]
        print(r.endpoint, fp["verdict"], fp["ranking"])
        assert fp["verdict"] == r.endpoint
        assert out.summary.fingerprints[r.endpoint]["verdict"] == r.endpoint  # published at the summary's top level
    # INT4 decode dominates FP8 KV: the two profiles are reported as indistinguishable rather than guessed apart
    int4 = next(r for r in out.summary.results if r.endpoint == "int4-decode").extra["fingerprint"]
    print("int4-decode indistinguishable from", int4["indistinguishable_from"])
