"""Quantization fingerprint: which known precision variant a candidate's KL profile is closest to.

A *profile* is a short feature vector of an endpoint's KL distribution against the BF16 reference:
log10 of the per-position KL at the 10th/50th/90th/99th percentiles and of the mean, separately for
the forced (prefill) path and the decode path (an INT4-*decode* variant is invisible on the prefill
path and loud on the decode path, so the two paths together tell the variants apart), plus the
"same top" rate. Profiles of the built-in engine's variants (FP8 KV, INT4 weights, INT4 decode, both)
are measured once on the same model and suite and saved (``python -m verifier.run.calibrate build``,
written to ``suites/logprob/profiles.json``); a run then compares each candidate's profile with them.

Distance = RMS difference over the features both profiles have (in decades of KL). The closest
profile wins when its distance is under ``UNKNOWN_DISTANCE``; otherwise the verdict is ``unknown``.
Naming a non-reference profile is a claim with an error rate: :mod:`verifier.kinds.logprob.fingerprint_null` gives
each match a ``p_value`` (simulated A/A twins of the reference) and the measured false-alarm rate of "p <= alpha".
A library measured on another model or suite version is not used (the verdict says so): the checkpoint's
sha256 when the reference is the built-in engine, the model id the reference answered with otherwise.

Libraries are calibrated by :mod:`verifier.run.calibrate` (``verifier fingerprint build`` for any endpoints,
this module's ``build`` for the built-in engine's variants: the same code pointed at ``builtin:`` URLs).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from suites import SUITES_DIR
from verifier.records import read_json_model

PROFILES_FILE = SUITES_DIR / "logprob" / "profiles.json"
# KL below this is "identical" for the log features. Not 0: two BF16 servers of one checkpoint differ by
# numerical noise (a prefix-cache hit, another batch shape or thread count) of 1e-6..1e-3 nats at a token, and
# on a log scale that noise would weigh as much as a quantization. Measured on the engine: an A/A pair through
# a warm prefix cache gives a decode-path median of 10^-5.9 and a mean of 10^-4.5; FP8 KV and INT4 decode give
# means of 10^-1.6 and 10^-0.8 (tests/kinds/logprob/test_fingerprint_endpoints.py prints them).
KL_FLOOR = 1e-4
UNKNOWN_DISTANCE = 0.5  # decades of KL, RMS over features
AMBIGUOUS_MARGIN = 0.1  # another profile within this much of the best one cannot be told apart from it
QS = (10, 50, 90, 99)


class KLProfile(BaseModel):
    features: dict[str, float] = Field(default_factory=dict)
    n_positions: dict[str, int] = Field(default_factory=dict)
    methods: dict[str, str] = Field(default_factory=dict)  # path -> logprob method(s) it was measured with


class CalibrationEndpoint(BaseModel):
    """How one variant was served when its profile was measured: enough to reproduce it, never a secret.

    ``source`` has no ``user:password@`` and no credential-like query values; headers keep their names only
    where the value looked secret (as the run manifest does); keys are named by their env var, never stored.
    """

    source: str
    model: str | None = None
    builtin: dict[str, Any] | None = None
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    stream: bool = False


class ProfileLibrary(BaseModel):
    model: str | None = None  # builtin model name/path, or the model id a URL reference served
    model_sha256: str | None = None  # of model.safetensors: profiles of another checkpoint are not used
    served_model: str | None = None  # the model id the reference answered with: profiles of another model are not used
    suite: str
    suite_hash: str
    reference: str = "bf16"
    profiles: dict[str, KLProfile] = Field(default_factory=dict)
    endpoints: dict[str, CalibrationEndpoint] = Field(default_factory=dict)  # variant (and reference) -> settings
    run_id: str | None = None  # the calibration run folder's id (its records hold every exchange)
    settings: dict[str, Any] = Field(default_factory=dict)  # run options that shape the features (top_logprobs, limit)


class Fingerprint(BaseModel):
    verdict: str  # profile name, or "unknown", or "no profiles"
    distance: float | None = None
    ranking: list[tuple[str, float]] = Field(default_factory=list)
    indistinguishable_from: list[str] = Field(default_factory=list)  # profiles within AMBIGUOUS_MARGIN of the best
    threshold: float = UNKNOWN_DISTANCE
    reason: str | None = None
    # error control (verifier.kinds.logprob.fingerprint_null): gap = distance to the reference profile minus the
    # nearest other profile's; p_value = P(gap this large | the endpoint serves the reference variant), from
    # simulated A/A twins; false_alarm_rate = how often "p_value <= alpha" names another profile on fresh A/A
    # twins (worst noise setting), over false_alarm_n twins; margin_calibrated = the gap where p reaches alpha.
    gap: float | None = None
    p_value: float | None = None
    false_alarm_rate: float | None = None
    false_alarm_n: int | None = None
    margin_calibrated: float | None = None
    alpha: float | None = None
    null_model: str | None = None


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
        from reference_engine.config import default_model_path

        path = default_model_path() / "model.safetensors"
    else:
        path = Path(model) / "model.safetensors"
    if not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def match(candidate: KLProfile, library: ProfileLibrary | None, *, suite_hash: str | None = None,
          model_sha256: str | None = None, served_model: str | None = None,
          threshold: float = UNKNOWN_DISTANCE) -> Fingerprint:
    """The closest profile of ``library`` to ``candidate``, or a verdict saying why none applies.

    ``served_model`` is the model id this run's reference answered with: profiles calibrated on another model
    describe another model's sensitivity to quantization and are refused, never silently compared.
    """
    if library is None or not library.profiles:
        return Fingerprint(verdict="no profiles", reason="no variant profiles measured for this model and suite "
                                                         "(calibrate with: verifier fingerprint build)")
    if model_sha256 is not None and library.model_sha256 is not None and model_sha256 != library.model_sha256:
        return Fingerprint(verdict="no profiles", reason="profiles were measured on another checkpoint; rebuild with "
                                                         "python -m verifier.run.calibrate build")
    if served_model is not None and library.served_model is not None and served_model != library.served_model:
        return Fingerprint(verdict="no profiles", reason=f"profiles were measured on model '{library.served_model}', "
                                                         f"this run's reference serves '{served_model}'; calibrate "
                                                         "this model with: verifier fingerprint build")
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
    """The library for ``suite`` in the file; None when the file or the suite's entry is absent."""
    path = Path(path)
    if not path.is_file():
        return None
    return read_profile_file(path).libraries.get(suite)


def read_profile_file(path: Path) -> ProfileFile:
    """Parse a profile file; a missing or malformed one is a ValueError of one line naming the file."""
    build = f"build one with: verifier fingerprint build ... --out {path}"
    return read_json_model(ProfileFile, path, missing=f"no such profile file ({build})",
                           unreadable="not a profile file")


def save_library(lib: ProfileLibrary, path: Path = PROFILES_FILE) -> ProfileLibrary | None:
    """Add ``lib`` to the file (one library per suite name); returns the library it replaced, if any.

    Written to a temporary file then renamed, so a kill never leaves half a profile file.
    """
    path = Path(path)
    pf = read_profile_file(path) if path.exists() else ProfileFile()
    replaced = pf.libraries.get(lib.suite)
    pf.libraries[lib.suite] = lib
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(pf.model_dump_json(indent=2) + "\n")
    os.replace(tmp, path)
    return replaced


def reference_model(records: list[Any], reference: str) -> str | None:
    """The model id the reference answered with (its responses' ``model``), for :func:`match`'s model check."""
    for r in records:
        if r.endpoint == reference and isinstance(r.response, dict) and isinstance(r.response.get("model"), str):
            return r.response["model"]
    return None


# ---------------------------------------------------------------------------------------------------------------
# the built-in engine's variants: the same calibration as ``verifier fingerprint build``, on builtin: URLs
# ---------------------------------------------------------------------------------------------------------------

VARIANTS = {
    "bf16": "",
    "fp8-kv": "kv=fp8",
    "int4-weights": "weights=int4",
    "int4-decode": "decode_weights=int4",
    "fp8-kv+int4-decode": "kv=fp8&decode_weights=int4",
}


def builtin_variant_urls(model: str = "tiny") -> dict[str, str]:
    """Variant label -> ``builtin:MODEL?OPTIONS`` URL (``bf16`` is the reference)."""
    return {name: f"builtin:{model}" + (f"?{opts}" if opts else "") for name, opts in VARIANTS.items()}
