"""Calibrate a fingerprint library from endpoints that serve one model in known precision variants.

``verifier fingerprint build --reference bf16=URL --endpoint fp8-kv=URL --endpoint int4-decode=URL`` runs the
logprob suite through the ordinary runner (same client, retries, preflight, run folder, ``--resume``) with the
reference under the run name ``reference`` and every labelled endpoint as a candidate, then turns each
candidate's KL profile (computed by the logprob kind's scoring) into a named profile. Each endpoint's label
*is* the variant's name: a later run whose candidate lands closest to ``int4-decode`` is reported as such.

By default the reference is also measured against itself (its label, e.g. ``bf16``, is a candidate at the same
URL): that A/A profile is what "no quantization" looks like on that server, batch non-determinism included,
and it is what an honest candidate should match.

Why a run folder and not a dedicated client: calibrating a real model takes long enough to be killed, and the
run folder gives resume, every exchange on disk, and ``--from-run DIR`` to rebuild profiles offline.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifier.http.endpoints import EndpointConfigError, EndpointSet, from_flags, load_config
from verifier.http.redaction import is_secret_header, public_url
from verifier.kinds.logprob.fingerprint import (
    PROFILES_FILE,
    CalibrationEndpoint,
    KLProfile,
    ProfileLibrary,
    builtin_variant_urls,
    checkpoint_sha256,
    save_library,
)
from verifier.kinds.logprob.tracks import TOP_K
from verifier.run.errors import InputError, RunFailed
from verifier.run.loading import load_suite
from verifier.run.runner import RunSettings, execute_run
from verifier.run.store import RunManifest, StoreError
from verifier.run.summary import RunSummary, SummaryFileError

RUN_REFERENCE = "reference"  # the reference's name inside the calibration run (its label names the A/A profile)


class CalibrationError(Exception):
    """Calibration could not be done; one line. ``exit_code`` 2 = bad input, 3 = the run or a variant failed."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class CalibrationRequest:
    """What ``verifier fingerprint build`` was asked: labelled endpoints (``LABEL=URL``) or a TOML file."""

    reference: str | None = None
    variants: list[str] = field(default_factory=list)
    config: Path | None = None
    suite: str = "logprob-core"
    out: Path | None = None
    run_dir: Path | None = None
    resume: Path | None = None
    model: str | None = None
    api_key_env: str | None = None
    limit: int | None = None
    concurrency: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    self_compare: bool = True
    display_progress: bool | None = False


@dataclass
class CalibrationOutcome:
    library: ProfileLibrary
    run_dir: Path
    missing: list[str] = field(default_factory=list)  # "label: why" for variants that got no profile
    replaced: ProfileLibrary | None = None  # the library for this suite that ``out`` held before
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------------
# endpoints
# ---------------------------------------------------------------------------------------------------------------

def _label(item: str, flag: str) -> tuple[str, str]:
    """``LABEL=URL`` -> (label, URL). The label is required: it is the name the profile is recognised by."""
    label, sep, url = item.partition("=")
    if not sep or not label or "://" in label or label.startswith("builtin:") or not url:
        raise CalibrationError(f"{flag} '{item}': write LABEL=URL (e.g. fp8-kv=http://127.0.0.1:8001/v1); "
                               "the label names the variant's profile")
    return label, url


def calibration_endpoints(req: CalibrationRequest) -> tuple[EndpointSet, str]:
    """The run's endpoint set (reference named ``reference``, labelled variants as candidates) and the
    reference's label. With ``self_compare`` the reference's label is a candidate at the reference's URL."""
    try:
        if req.config is not None:
            if req.reference or req.variants:
                raise CalibrationError("--config and --reference/--endpoint are exclusive; put every endpoint in the "
                                       "file")
            eps = load_config(req.config, api_key_env=req.api_key_env)
            if req.model:
                for e in eps.endpoints:
                    if e.model is None and not eps.sources[e.name].startswith("builtin:"):
                        e.model = req.model
        else:
            if not req.reference:
                raise CalibrationError("--reference LABEL=URL is required (the unquantized server, e.g. bf16=URL)")
            if not req.variants:
                raise CalibrationError("give at least one --endpoint LABEL=URL (a known variant of the same model)")
            ref = _label(req.reference, "--reference")
            items = [ref] + [_label(v, "--endpoint") for v in req.variants]
            eps = from_flags(f"{ref[0]}={ref[1]}", [f"{n}={u}" for n, u in items[1:]], model=req.model,
                             api_key_env=req.api_key_env)
    except EndpointConfigError as e:
        raise CalibrationError(str(e)) from None
    label = eps.reference
    if RUN_REFERENCE in eps.sources:
        raise CalibrationError(f"the label '{RUN_REFERENCE}' is reserved for the calibration run's reference; "
                               "pick another label")
    ref_cfg = eps.get(label)
    configs = [ref_cfg.model_copy(update={"name": RUN_REFERENCE}, deep=True)]
    sources = {RUN_REFERENCE: eps.sources[label]}
    for cfg in eps.endpoints:
        if cfg.name == label and not req.self_compare:
            continue
        configs.append(cfg)
        sources[cfg.name] = eps.sources[cfg.name]
    if len(configs) < 2:
        raise CalibrationError("nothing to calibrate: no variant besides the reference (drop --no-self-compare "
                               "or add --endpoint LABEL=URL)")
    if req.concurrency is not None:
        for cfg in configs:
            cfg.concurrency = req.concurrency
    return EndpointSet(configs, RUN_REFERENCE, sources), label


# ---------------------------------------------------------------------------------------------------------------
# from a finished run folder to a library
# ---------------------------------------------------------------------------------------------------------------

def library_from_run(run_dir: Path, *, suite: str | None = None,
                     reference_label: str | None = None) -> tuple[ProfileLibrary, list[str]]:
    """Profiles of every candidate of a finished logprob run; returns (library, ["label: why" per missing one]).

    The reference's label is ``reference_label``, else the candidate served from the reference's own source
    (the A/A pair a calibration run makes), else the reference's run name.
    """
    run_dir = Path(run_dir)
    try:
        manifest = RunManifest.load(run_dir)
    except StoreError as e:
        raise CalibrationError(str(e)) from None
    path = run_dir / "summary.json"
    if not path.is_file():
        raise CalibrationError(f"{path}: no summary.json; the run did not finish (continue it with --resume {run_dir})")
    try:
        summary = RunSummary.read(run_dir)
    except SummaryFileError as e:
        raise CalibrationError(str(e)) from None
    logprob = [m for m in summary.suites if m.kind == "logprob" and (suite is None or m.name == suite)]
    if len(logprob) != 1:
        names = [m.name for m in summary.suites if m.kind == "logprob"]
        raise CalibrationError(f"{run_dir}: {'no' if not names else 'several'} logprob suite(s) {names} to build "
                               "profiles from" + (" (name one with --suite)" if len(names) > 1 else ""))
    man = logprob[0]
    by_name = {me.name: me for me in manifest.endpoints}
    ref_me = by_name.get(summary.reference)
    if ref_me is None:
        raise CalibrationError(f"{run_dir}: the reference '{summary.reference}' is not in manifest.json")
    if reference_label is None:
        twins = [me.name for me in manifest.endpoints if me.name != ref_me.name and me.source == ref_me.source]
        reference_label = twins[0] if twins else ref_me.name
    spec = ref_me.builtin
    lib = ProfileLibrary(
        model=spec["model"] if spec else ref_me.model, served_model=ref_me.model,
        model_sha256=checkpoint_sha256(spec["model"]) if spec else None, suite=man.name, suite_hash=man.content_hash,
        reference=reference_label, run_id=summary.run_id,
        settings={k: v for k, v in {"limit": summary.settings.get("limit"),
                                    "top_logprobs": (summary.settings.get("options") or {}).get("top_logprobs",
                                                                                                TOP_K)}.items()
                  if v is not None})
    for me in manifest.endpoints:
        lib.endpoints[me.name] = CalibrationEndpoint(
            source=public_url(me.source), model=me.model, builtin=me.builtin, api_key_env=me.api_key_env,
            headers={k: "<redacted>" if is_secret_header(k) else v for k, v in me.headers.items()},
            extra_body=me.extra_body, stream=me.stream)
    missing: list[str] = []
    for r in summary.results:
        if r.suite != man.name or r.is_reference:
            continue
        prof = r.extra.get("profile")
        if not prof or not prof.get("features"):
            why = r.notes[0] if r.notes else "no KL measured"
            missing.append(f"{r.endpoint}: {why}")
            continue
        profile = KLProfile.model_validate(prof)
        profile.methods = {p: ",".join(sorted(d.get("methods", {}))) for p, d in (r.extra.get("paths") or {}).items()}
        lib.profiles[r.endpoint] = profile
    return lib, missing


# ---------------------------------------------------------------------------------------------------------------
# the whole calibration
# ---------------------------------------------------------------------------------------------------------------

def _check_logprob_suite(ref: str, options: dict[str, Any]) -> None:
    try:
        kind, _ = load_suite(ref, options)
    except InputError as e:
        raise CalibrationError(str(e)) from None
    if kind.kind != "logprob":
        raise CalibrationError(f"--suite {ref}: a {kind.kind} suite; profiles come from a logprob suite "
                               "(logprob-core, logprob-smoke or a logprob JSONL file)")


def calibrate(req: CalibrationRequest) -> CalibrationOutcome:
    """Run the logprob suite against the labelled endpoints (or resume that run) and build the library.

    The library is written to ``req.out`` when given, even when some variant got no profile (those are
    listed in ``missing``, and the CLI exits 3): what was measured is not lost, and the run folder keeps
    every exchange for ``--from-run``.
    """
    options = {**req.options, **({"limit": req.limit} if req.limit else {})}
    if req.resume is not None and not (req.reference or req.variants or req.config):
        eps, label = None, None  # the run folder's manifest has them
    else:
        eps, label = calibration_endpoints(req)
    if req.resume is None:
        _check_logprob_suite(req.suite, options)
    settings = RunSettings(suites=[req.suite], endpoints=eps, out=req.run_dir, resume=req.resume, limit=req.limit,
                           options=dict(req.options), display_progress=req.display_progress)
    try:
        outcome = execute_run(settings)
    except InputError as e:
        raise CalibrationError(str(e)) from None
    except RunFailed as e:
        raise CalibrationError("; ".join(e.lines) or "the calibration run failed", e.exit_code) from None
    lib, missing = library_from_run(outcome.run_dir, reference_label=label)
    warnings = list(outcome.warnings) + [f"calibration run: {p}" for p in outcome.problems]
    if not lib.profiles:
        raise CalibrationError(f"no variant got a profile ({'; '.join(missing)}); run folder {outcome.run_dir}", 3)
    replaced = save_library(lib, req.out) if req.out is not None else None
    return CalibrationOutcome(library=lib, run_dir=outcome.run_dir, missing=missing, replaced=replaced,
                              warnings=warnings)


def build_from_run(run_dir: Path, out: Path | None, *, suite: str | None = None,
                   reference_label: str | None = None) -> CalibrationOutcome:
    """``--from-run DIR``: profiles from a finished run folder, without sending anything."""
    lib, missing = library_from_run(run_dir, suite=suite, reference_label=reference_label)
    if not lib.profiles:
        raise CalibrationError(f"{run_dir}: no candidate has a profile ({'; '.join(missing)})", 3)
    replaced = save_library(lib, out) if out is not None else None
    return CalibrationOutcome(library=lib, run_dir=Path(run_dir), missing=missing, replaced=replaced)


def build_library(model: str = "tiny", suite: str = "logprob-core", out: Path | None = None,
                  run_dir: Path | None = None, options: dict | None = None) -> ProfileLibrary:
    """Calibrate the built-in engine's variants: BF16 as reference (and as its own A/A candidate), the rest as
    candidates, through :func:`calibrate` exactly as URL endpoints would be."""
    urls = builtin_variant_urls(model)
    ref_url = urls.pop("bf16")
    req = CalibrationRequest(reference=f"bf16={ref_url}", variants=[f"{n}={u}" for n, u in urls.items()], suite=suite,
                             out=out, run_dir=run_dir, options=dict(options or {}))
    return calibrate(req).library


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m verifier.run.calibrate",
                                 description="Measure KL profiles of the built-in engine's precision variants "
                                             "(for other endpoints: verifier fingerprint build).")
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
