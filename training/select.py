"""Choose among candidate checkpoints on validation cases that the reported figures never use.

    python -m training.select shipped /tmp/run/ema999 raw=/tmp/run/raw --out select.json

Why: one training run can give several exports (the last step, averages of several decays: ``training.train
--raw-out``, ``--also-ema``), and runs of one recipe differ by several points (training/JOURNAL.md). Picking the
export that scores best on the 300 held-out cases that MODEL_CARD.md reports would report a maximum of noisy
draws as if it were the model's quality. So the choice is made here, on *other* cases of the same
distribution: toolcall-core cases 300 to 900 by default (the report uses 0 to 300) and agent-smoke
environments at seeds 5 to 9 (the report uses 0 to 4, training uses seeds from 10**6 on). The chosen
checkpoint is then scored once with ``training.evaluate`` on the reported cases.

The rule, fixed before any candidate is seen: rank by how many of issue #5's three bars a candidate meets on
validation (trigger F1 >= 0.95, schema accuracy >= 0.97, agent success >= 0.9), then by its smallest
value/bar ratio (the bar it is furthest from), then by case accuracy.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from reference_engine.launch import default_model_path, start_server
from training.evaluate import (
    CORE_SUITE,
    MODEL_ID,
    REPORTED_AGENT_SEEDS,
    REPORTED_CASES,
    failure_breakdown,
    run_agent,
    run_toolcall,
    toolcall_metrics,
)
from verifier.kinds.toolcall.suite_format import load_jsonl

#: issue #5's bars, in BF16
BARS = {"trigger_f1": 0.95, "schema_accuracy": 0.97, "agent_success": 0.9}


@dataclass(frozen=True)
class Candidate:
    """A checkpoint to score: a label for the table and its folder (None: the shipped model)."""

    name: str
    folder: Path | None


@dataclass(frozen=True)
class ValidationScore:
    """One candidate's validation figures and its rank key."""

    name: str
    folder: str
    trigger_f1: float
    schema_accuracy: float
    schema_calls: int
    agent_success: float
    agent_tasks: int
    case_accuracy: float
    n_cases: int
    outcomes: dict[str, dict[str, int]]
    #: sha256 of the scored model.safetensors: "shipped" names different weights after each release, so a
    #: saved score says which ones it measured (empty in files written before this field)
    weights_sha256: str = ""

    def ratios(self) -> dict[str, float]:
        return {k: getattr(self, k) / bar for k, bar in BARS.items()}

    def rank_key(self) -> tuple[int, float, float]:
        ratios = self.ratios()
        return (sum(r >= 1.0 for r in ratios.values()), min(ratios.values()), self.case_accuracy)


def parse_candidate(spec: str) -> Candidate:
    """``shipped``, ``DIR`` or ``NAME=DIR``."""
    if spec == "shipped":
        return Candidate("shipped", None)
    name, sep, folder = spec.partition("=")
    if not sep:
        name, folder = Path(spec).name, spec
    if not (Path(folder) / "model.safetensors").is_file():
        raise ValueError(f"candidate {spec!r}: no model.safetensors in {folder}")
    return Candidate(name, Path(folder))


def parse_range(text: str) -> slice:
    start, sep, stop = text.partition(":")
    if not sep or not start.isdigit() or not stop.isdigit() or int(start) >= int(stop):
        raise ValueError(f"--cases wants START:STOP (e.g. 300:900), not {text!r}")
    return slice(int(start), int(stop))


def weights_digest(folder: Path | None) -> str:
    """sha256 of a checkpoint's weights file (the shipped one for None)."""
    path = (folder or default_model_path()) / "model.safetensors"
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_unique_names(named_folders: list[tuple[str, str]]) -> None:
    """Refuse two candidates under one name, as (name, folder) pairs: the table and the choice would be ambiguous.
    An earlier file's ``shipped`` is whatever was shipped then, so a new ``shipped`` beside it must be renamed."""
    seen: dict[str, str] = {}
    for name, folder in named_folders:
        if name in seen:
            raise ValueError(f"two candidates are named {name!r} ({seen[name]} and {folder}); "
                             "give one another name with NAME=DIR")
        seen[name] = folder


def same_weights_notes(scores: list[ValidationScore]) -> list[str]:
    """A line for each score that measured weights already scored under another name (e.g. a run's export and
    the model shipped from it), so the table is not read as two independent draws."""
    first_by_digest: dict[str, str] = {}
    notes = []
    for s in scores:
        if not s.weights_sha256:
            continue
        if s.weights_sha256 in first_by_digest:
            notes.append(f"{s.name} and {first_by_digest[s.weights_sha256]} are the same weights")
        else:
            first_by_digest[s.weights_sha256] = s.name
    return notes


def score(candidate: Candidate, cases: list[Any], scenarios: list[Any]) -> ValidationScore:
    """Serve the candidate in BF16 and score it on the validation cases and agent tasks."""
    with start_server(candidate.folder) as srv:
        MODEL_ID[srv.base_url] = srv.model
        results = asyncio.run(run_toolcall(srv.base_url, cases))
        runs = asyncio.run(run_agent(srv.base_url, scenarios))
    tc = toolcall_metrics(results)
    wins, tasks = sum(r.success for r in runs), len(runs)
    return ValidationScore(
        name=candidate.name, folder=str(candidate.folder or "shipped"),
        trigger_f1=tc["trigger_f1"]["value"] or 0.0, schema_accuracy=tc["schema_accuracy"]["value"] or 0.0,
        schema_calls=tc["schema_accuracy"]["n"], agent_success=wins / max(1, tasks), agent_tasks=tasks,
        case_accuracy=tc["case_accuracy"]["value"] or 0.0, n_cases=len(cases), outcomes=failure_breakdown(results,
                                                                                                          cases),
        weights_sha256=weights_digest(candidate.folder))


def load_scores(path: Path, cases: str, seeds: list[int], horizon: int) -> list[ValidationScore]:
    """The scores of an earlier run of this script, if it validated on the same cases and tasks."""
    data = json.loads(path.read_text())
    if (data["cases"], data["agent_seeds"], data["horizon"]) != (cases, seeds, horizon):
        raise ValueError(f"scored on cases {data['cases']}, agent seeds {data['agent_seeds']}, horizon "
                         f"{data['horizon']}; this ranking uses {cases}, {seeds}, {horizon}")
    return [ValidationScore(**s) for s in data["scores"]]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("candidates", nargs="*", help="shipped, DIR or NAME=DIR")
    ap.add_argument("--include", type=Path, action="append", default=[],
                    help="an earlier --out of this script: its candidates join the ranking without being re-scored "
                         "(it must have used the same cases, agent seeds and horizon)")
    ap.add_argument("--cases", default="300:900", help="toolcall-core validation cases START:STOP")
    ap.add_argument("--agent-seeds", default="5,6,7,8,9")
    ap.add_argument("--agent-horizon", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        candidates = [parse_candidate(s) for s in args.candidates]
        window = parse_range(args.cases)
        seeds = [int(s) for s in args.agent_seeds.split(",")]
    except ValueError as exc:
        ap.error(str(exc))
    if window.start < REPORTED_CASES or min(seeds) <= max(REPORTED_AGENT_SEEDS):
        ap.error(f"validation must not touch the reported cases (toolcall-core 0-{REPORTED_CASES}, agent seeds "
                 f"{min(REPORTED_AGENT_SEEDS)}-{max(REPORTED_AGENT_SEEDS)})")
    scores: list[ValidationScore] = []
    for path in args.include:
        try:
            scores += load_scores(path, args.cases, seeds, args.agent_horizon)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            ap.error(f"--include {path}: {exc}")
    if not candidates and not scores:
        ap.error("nothing to rank: name candidates or --include earlier scores")
    try:
        check_unique_names([(s.name, s.folder) for s in scores]
                           + [(c.name, str(c.folder or "shipped")) for c in candidates])
    except ValueError as exc:
        ap.error(str(exc))
    cases = load_jsonl(CORE_SUITE, name="toolcall-core").cases[window]
    from suites.agent.scenarios import ENVIRONMENTS, scenario
    scenarios = [scenario(env, args.agent_horizon, seed) for env in ENVIRONMENTS for seed in seeds]

    for cand in candidates:
        s = score(cand, cases, scenarios)
        scores.append(s)
        print(f"{s.name}: F1 {s.trigger_f1:.3f} schema {s.schema_accuracy:.3f} (n={s.schema_calls}) "
              f"agent {s.agent_success:.2f} (n={s.agent_tasks}) case {s.case_accuracy:.3f} (n={s.n_cases})",
              flush=True)
    for note in same_weights_notes(scores):
        print(note)
    best = max(scores, key=ValidationScore.rank_key)
    print(f"chosen: {best.name} ({best.folder}); bars met on validation: {best.rank_key()[0]} of {len(BARS)}")
    if args.out:
        args.out.write_text(json.dumps({"cases": args.cases, "agent_seeds": seeds, "horizon": args.agent_horizon,
                                        "rule": "bars met, then smallest value/bar ratio, then case accuracy",
                                        "chosen": best.name, "scores": [asdict(s) for s in scores]}, indent=2) + "\n")


if __name__ == "__main__":
    main()
