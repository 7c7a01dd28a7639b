"""The pace check of ``training.train``: a retrain the time budget stops well short of the shipped run's
step count is flagged in its log, because at this size the step count decides the model's quality."""

from __future__ import annotations

import torch
from safetensors.torch import save_file

from training.pace import RecordedRun, pace_warning, projected_steps, recorded_run
from training.train import SHIPPED_CHECKPOINT


def test_projection_follows_the_pace_and_stops_at_the_planned_steps() -> None:
    assert projected_steps(1000, 200.0, 2400.0, 16000) == 12000
    assert projected_steps(1000, 100.0, 2400.0, 16000) == 16000  # a fast machine finishes the plan
    assert projected_steps(1000, 0.0, 2400.0, 16000) == 16000


def test_warning_only_below_the_tolerated_share_of_the_shipped_steps() -> None:
    assert pace_warning(12000, 12746) is None
    assert pace_warning(12000, None) is None  # no shipped run to compare with
    message = pace_warning(9346, 12746)
    assert message is not None and "9346" in message and "12746" in message and "73%" in message


def test_recorded_run_read_from_a_finished_checkpoint_only(tmp_path) -> None:
    tensors = {"w": torch.zeros(2)}
    finished, grouped = tmp_path / "a.safetensors", tmp_path / "g.safetensors"
    partial, broken = tmp_path / "b.safetensors", tmp_path / "c.safetensors"
    save_file(tensors, str(finished), metadata={"step": "321", "final": "true"})
    save_file(tensors, str(grouped), metadata={"step": "99", "final": "true", "batch_tokens": "3072",
                                               "group_size": "4"})
    muon = tmp_path / "m.safetensors"
    save_file(tensors, str(muon), metadata={"step": "11317", "final": "true", "batch_tokens": "1536",
                                            "group_size": "1", "optimizer": "muon"})
    save_file(tensors, str(partial), metadata={"step": "200", "final": "false"})
    broken.write_bytes(b"not a checkpoint")
    assert recorded_run(finished) == RecordedRun(321, 1536, 1)  # older runs recorded only their steps
    assert recorded_run(grouped) == RecordedRun(99, 3072, 4)
    assert recorded_run(muon) == RecordedRun(11317, 1536, 1, "muon")  # a Muon step is not an AdamW step
    assert recorded_run(partial) is None  # an intermediate export says nothing about a whole run
    assert recorded_run(broken) is None
    assert recorded_run(tmp_path / "missing.safetensors") is None
    assert recorded_run(SHIPPED_CHECKPOINT) is not None  # the shipped model records its run
