"""Quantization fingerprint: which known precision variant a candidate's KL profile is closest to.

A *profile* is a short feature vector of an endpoint's KL distribution against the BF16 reference:
log10 of the per-position KL at the 10th/50th/90th/99th percentiles and of the mean, separately for
the forced (prefill) path and the decode path (an INT4-*decode* variant is invisible on the prefill
path and loud on the decode path, so the two paths together tell the variants apart), plus the
"same top" rate. Profiles of the built-in engine's variants (FP8 KV, INT4 weights, INT4 decode, both)
are measured once on the same model and suite and saved (``python -m verifier.kl.fingerprint build``,
written to ``suites/logprob/profiles.json``); a run then compares each candidate's profile with them.

Distance = RMS difference over the features both profiles have (in decades of KL). The closest
profile wins when its distance is under ``UNKNOWN_DISTANCE``; otherwise the verdict is ``unknown``.
A library measured on another model or suite version is not used (the verdict says so).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

PROFILES_FILE = Path(__file__).resolve().parent.parent.parent / "suites" / "logprob" / "profiles.json"
KL_FLOOR = 1e-9  # KL below this is "identical" for the log features (an exact A/A gives 0)
UNKNOWN_DISTANCE = 0.5  # decades of KL, RMS over features
AMBIGUOUS_MARGIN = 0.1  # another profile within this much of the best one cannot be told apart from it
QS = (10, 50, 90, 99)


class KLProfile(BaseModel):
    features: dict[str, float] = Field(default_factory=dict)
    n_positions: dict[str, int] = Field(default_factory=dict)


class ProfileLibrary(BaseModel):
    model: str | None = None
    model_sha256: str | None = None  # of model.safetensors: profiles of another checkpoint are not used
    suite: str
    suite_hash: str
    reference: str = "bf16"
    profiles: dict[str, KLProfile] = Field(default_factory=dict)


class Fingerprint(BaseModel):
    verdict: str  # profile name, or "unknown", or "no profiles"
    distance: float | None = None
    ranking: list[tuple[str, float]] = Field(default_factory=list)
    indistinguishable_from: list[str] = Field(default_factory=list)  # profiles within AMBIGUOUS_MARGIN of the best
    threshold: float = UNKNOWN_DISTANCE
    reason: str | None = None


def make_profile(paths: dict[str, tuple[np.ndarray, np.ndarray | None]]) -> KLProfile:
    """``paths``: path name ("forced"/"decode") -> (per-position KL, same-top flags or None)."""
    prof = KLProfile()
    for path, (kl, same) in paths.items():
        kl = np.asarray(kl, dtype=np.float64)
        if kl.size == 0:
            continue
        logs = np.log10(np.maximum(kl, KL_FLOOR))
        for q, v in zip(QS, np.percentile(logs, QS)):
            prof.features[f"{path}_log10_kl_p{q}"] = float(v)
        prof.features[f"{path}_log10_kl_mean"] = float(math.log10(max(float(kl.mean()), KL_FLOOR)))
        if same is not None and len(same):
            # scaled so 10 points of top-1 agreement weigh like a decade of KL
            prof.features[f"{path}_same_top_x10"] = float(np.mean(same)) * 10.0
        prof.n_positions[path] = int(kl.size)
    return prof


def distance(a: KLProfile, b: KLProfile) -> float | None:
    keys = sorted(set(a.features) & set(b.features))
    if not keys:
        return None
    d = np.array([a.features[k] - b.features[k] for k in keys])
    return float(np.sqrt(np.mean(d * d)))


def checkpoint_sha256(model: str | Path) -> str | None:
    """sha256 of a builtin model's weights (``tiny`` = the shipped model); None when not found."""
    import hashlib

    if str(model) in ("tiny", "verifier-tiny"):
        from reference_engine.launch import default_model_path

        path = default_model_path() / "model.safetensors"
    else:
        path = Path(model) / "model.safetensors"
    if not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def match(candidate: KLProfile, library: ProfileLibrary | None, *, suite_hash: str | None = None,
          model_sha256: str | None = None, threshold: float = UNKNOWN_DISTANCE) -> Fingerprint:
    if library is None or not library.profiles:
        return Fingerprint(verdict="no profiles", reason="no variant profiles measured for this model and suite "
                                                         "(python -m verifier.kl.fingerprint build)")
    if model_sha256 is not None and library.model_sha256 is not None and model_sha256 != library.model_sha256:
        return Fingerprint(verdict="no profiles", reason="profiles were measured on another checkpoint; rebuild with "
                                                         "python -m verifier.kl.fingerprint build")
    if suite_hash is not None and library.suite_hash != suite_hash:
        return Fingerprint(verdict="no profiles", reason=f"profiles were measured on another version of "
                                                         f"{library.suite} ({library.suite_hash[:12]})")
    ranking = [(name, dd) for name, p in library.profiles.items() if (dd := distance(candidate, p)) is not None]
    ranking.sort(key=lambda x: x[1])
    if not ranking:
        return Fingerprint(verdict="unknown", reason="the candidate shares no measured path with the profiles")
    best, dist = ranking[0]
    verdict = best if dist <= threshold else "unknown"
    close = [n for n, d in ranking[1:] if d - dist <= AMBIGUOUS_MARGIN] if verdict != "unknown" else []
    return Fingerprint(verdict=verdict, distance=dist, ranking=[(n, round(d, 4)) for n, d in ranking],
                       threshold=threshold, indistinguishable_from=close,
                       reason=None if verdict != "unknown" else f"closest profile '{best}' is {dist:.2f} decades away")


class ProfileFile(BaseModel):
    """``profiles.json``: one library per suite name (profiles depend on the prompts)."""

    libraries: dict[str, ProfileLibrary] = Field(default_factory=dict)


def load_library(suite: str, path: Path = PROFILES_FILE) -> ProfileLibrary | None:
    if not path.is_file():
        return None
    try:
        return ProfileFile.model_validate_json(path.read_text()).libraries.get(suite)
    except ValueError as e:
        raise ValueError(f"{path}: not a profile file ({str(e).splitlines()[0]})") from None


def save_library(lib: ProfileLibrary, path: Path = PROFILES_FILE) -> None:
    pf = ProfileFile.model_validate_json(path.read_text()) if path.is_file() else ProfileFile()
    pf.libraries[lib.suite] = lib
    path.write_text(pf.model_dump_json(indent=2) + "\n")


# ---------------------------------------------------------------------------------------------------------------
# building the library on the built-in engine
# ---------------------------------------------------------------------------------------------------------------

VARIANTS = {
    "bf16": "",
    "fp8-kv": "kv=fp8",
    "int4-weights": "weights=int4",
    "int4-decode": "decode_weights=int4",
    "fp8-kv+int4-decode": "kv=fp8&decode_weights=int4",
}


def build_library(model: str = "tiny", suite: str = "logprob-core", out: Path | None = None,
                  run_dir: Path | None = None, options: dict | None = None) -> ProfileLibrary:
    """Run ``suite`` with the BF16 engine as reference and every variant (plus a second BF16) as candidates."""
    from verifier.endpoints import from_flags
    from verifier.runner import RunSettings, execute_run

    def url(opts: str) -> str:
        return f"builtin:{model}" + (f"?{opts}" if opts else "")

    eps = from_flags(f"reference={url('')}", [f"{name}={url(opts)}" for name, opts in VARIANTS.items()])
    outcome = execute_run(RunSettings(suites=[suite], endpoints=eps, out=run_dir, history=False, render=False,
                                      display_progress=False, options=dict(options or {})))
    man = outcome.summary.suites[0]
    lib = ProfileLibrary(model=model, model_sha256=checkpoint_sha256(model), suite=man.name,
                         suite_hash=man.content_hash)
    for r in outcome.summary.results:
        if r.is_reference or "profile" not in r.extra:
            continue
        lib.profiles[r.endpoint] = KLProfile.model_validate(r.extra["profile"])
    if out is not None:
        save_library(lib, out)
    return lib


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m verifier.kl.fingerprint",
                                 description="Measure KL profiles of the built-in engine's precision variants.")
    ap.add_argument("command", choices=["build"])
    ap.add_argument("--model", default="tiny", help="builtin model name or checkpoint path (default: tiny)")
    ap.add_argument("--suite", default="logprob-core")
    ap.add_argument("--out", type=Path, default=PROFILES_FILE)
    ap.add_argument("--run-dir", type=Path, default=None)
    args = ap.parse_args()
    lib = build_library(args.model, args.suite, args.out, args.run_dir)
    for name, p in lib.profiles.items():
        print(name, json.dumps({k: round(v, 3) for k, v in p.features.items()}))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
