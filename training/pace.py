"""Training pace: whether a run on this machine will finish the planned steps in its time budget, judged against
the steps the shipped checkpoint recorded (``recorded_run``), so a slow machine is told early rather than after
hours of a run that stops short of the recipe."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from safetensors import SafetensorError, safe_open

#: a retrain projected below this share of the shipped run's steps gets a warning (see ``pace_warning``)
PACE_TOLERANCE = 0.85


#: steps at which the pace is reported (the tokens/s of the first minutes run a little below the final ones)
PACE_CHECKS = (1000, 2000, 4000, 8000)


@dataclass(frozen=True)
class RecordedRun:
    """What a finished training run wrote into its checkpoint's metadata: enough to tell whether another
    run's step count can be compared with it (a step of a different batch size, grouping or optimizer is not:
    a Muon step costs more time than an AdamW step and does more)."""

    steps: int
    batch_tokens: int
    group_size: int
    optimizer: str = "adamw"


def recorded_run(checkpoint: Path) -> RecordedRun | None:
    """The run recorded in a finished checkpoint (None when unknown). Checkpoints from before the batch
    size, grouping and optimizer were recorded used the then only recipe: 1,536-token batches, no groups,
    AdamW."""
    try:
        with safe_open(str(checkpoint), "pt") as f:
            meta = f.metadata() or {}
    except (OSError, SafetensorError):
        return None
    if meta.get("final") != "true" or not str(meta.get("step", "")).isdigit():
        return None
    return RecordedRun(int(meta["step"]), int(meta.get("batch_tokens", 1536)), int(meta.get("group_size", 1)),
                       meta.get("optimizer", "adamw"))


def projected_steps(step: int, elapsed_s: float, budget_s: float, total: int) -> int:
    """The step at which the time budget will end the schedule, if the pace so far holds."""
    if elapsed_s <= 0:
        return total
    return min(total, int(step * budget_s / elapsed_s))


def pace_warning(projected: int, reference: int | None, tolerance: float = PACE_TOLERANCE) -> str | None:
    """A warning when the budget will stop this run well short of the shipped run's step count.

    Why: the budget is wall-clock time, so a slower or busier machine trains fewer steps, and at this size
    the steps decide: the shipped recipe rerun with 73 % of its steps fell from 105 to 41 correct held-out
    cases (training/JOURNAL.md, "Retrains of 2026-12-03"). Such a retrain says little about the recipe and should not
    replace the model.
    """
    if reference is None or projected >= tolerance * reference:
        return None
    return (f"WARNING: at this pace the time budget ends the schedule near step {projected}, "
            f"{projected / reference:.0%} of the shipped run's {reference}; this machine is too slow or busy "
            f"for the result to be compared with the shipped checkpoint (see MODEL_CARD.md, Retraining)")
