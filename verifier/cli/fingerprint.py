"""``verifier fingerprint build``: calibrate quantization profiles from endpoints serving known variants.

The work is in :mod:`verifier.run.calibrate`; this module only maps flags to a :class:`CalibrationRequest`
and errors to one stderr line and an exit code (2 bad input, 3 the run or a variant failed).
"""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer

from verifier.kinds.logprob.fingerprint import KL_FLOOR
from verifier.run.calibrate import CalibrationError, CalibrationOutcome, CalibrationRequest, build_from_run, calibrate

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Quantization fingerprints: calibrate variant profiles from endpoints.")


def _fail(message: str, code: int) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def _options(items: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            _fail(f"--option: '{item}' is not KEY=VALUE", 2)
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


@app.command()
def build(
    reference: str | None = typer.Option(None, "--reference",
                                         help="The unquantized server, LABEL=URL "
                                              "(e.g. bf16=http://127.0.0.1:8000/v1 or bf16=builtin:tiny)."),
    endpoint: list[str] | None = typer.Option(None, "--endpoint", "-e",
                                              help="A known variant of the same model, LABEL=URL (repeatable); "
                                                   "the label names its profile."),
    config: Path | None = typer.Option(None, "--config",
                                       help="TOML endpoints file instead of the flags "
                                            "(its reference's name is the reference label)."),
    suite: str = typer.Option("logprob-core", "--suite", "-s",
                              help="Logprob suite: logprob-core, logprob-smoke or a JSONL file."),
    out: Path | None = typer.Option(None, "--out",
                                    help="Profile file to write (one library per suite; "
                                         "an existing file keeps its other suites)."),
    run_dir: Path | None = typer.Option(None, "--run-dir",
                                           help="Run folder for the calibration run (default runs/<UTC timestamp>)."),
    resume: Path | None = typer.Option(None, "--resume", help="Continue a killed calibration run in this folder."),
    from_run: Path | None = typer.Option(None, "--from-run",
                                            help="Build from a finished run folder; sends nothing."),
    model: str | None = typer.Option(None, "--model",
                                        help="Model id for URL endpoints (default: first of GET /models)."),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Name of the env var holding the API key."),
    limit: int | None = typer.Option(None, "--limit", min=1,
                                        help="Only the first N cases (runs that use the profiles must use the same)."),
    concurrency: int | None = typer.Option(None, "--concurrency", min=1, help="Requests in flight per endpoint."),
    self_compare: bool = typer.Option(True, "--self-compare/--no-self-compare",
                                      help="Measure the reference against itself as its label's profile (default on)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    option: list[str] | None = typer.Option(None, "--option", "-o",
                                               help="Logprob option KEY=VALUE, e.g. top_logprobs=5, tokenizer=PATH."),
) -> None:
    """Run a logprob suite against LABEL=URL endpoints of one model and write each variant's KL profile.

    Use the result with: verifier run --option kl_profiles=FILE (or \\[fingerprint] profiles = "FILE" in --config).
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if out is None:
        _fail("--out FILE is required (the profile file to write)", 2)
    if out.is_dir():
        _fail(f"--out {out}: is a folder; name the profile file (e.g. {out / 'profiles.json'})", 2)
    try:
        if from_run is not None:
            if reference or endpoint or config or resume:
                _fail("--from-run builds from a finished run; it takes no endpoints and no --resume", 2)
            outcome = build_from_run(from_run, out, suite=None if suite == "logprob-core" else suite)
        else:
            outcome = calibrate(CalibrationRequest(
                reference=reference, variants=list(endpoint or []), config=config, suite=suite, out=out,
                run_dir=run_dir, resume=resume, model=model, api_key_env=api_key_env, limit=limit,
                concurrency=concurrency, options=_options(option), self_compare=self_compare,
                display_progress=False if quiet else None))
    except CalibrationError as e:
        _fail(str(e), e.exit_code)
        return
    except KeyboardInterrupt:
        where = resume or run_dir or "the run folder"
        print(f"interrupted; records so far are on disk. Continue with: verifier fingerprint build --resume {where} "
              f"--out {out}", file=sys.stderr)
        raise typer.Exit(130) from None
    _report(outcome, out)


def _report(outcome: CalibrationOutcome, out: Path) -> None:
    lib = outcome.library
    for w in outcome.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"calibration run: {outcome.run_dir}")
    print(f"model {lib.served_model or lib.model}, suite {lib.suite} ({lib.suite_hash[:12]}), reference label "
          f"'{lib.reference}'")
    for name, prof in lib.profiles.items():
        feats = prof.features
        shown = "; ".join(f"{path} ({prof.methods.get(path, '?')}, {prof.n_positions.get(path, 0)} positions): "
                          f"log10 KL p50 {feats[f'{path}_log10_kl_p50']:.2f}, mean {feats[f'{path}_log10_kl_mean']:.2f}"
                          for path in ("forced", "decode") if f"{path}_log10_kl_mean" in feats)
        print(f"  {name}: {shown}")
    print(f"  (log10 KL features are floored at {math.log10(KL_FLOOR):.0f}: below that two servers differ by noise)")
    if outcome.replaced is not None:
        old = outcome.replaced
        print(f"replaced the {old.suite} library in {out} (was model {old.served_model or old.model}, "
              f"profiles {sorted(old.profiles)})")
    print(f"wrote {out}")
    if outcome.missing:
        for line in outcome.missing[:-1]:
            print(f"error: no profile for {line}", file=sys.stderr)
        _fail(f"no profile for {outcome.missing[-1]} (the other profiles were written)", 3)
