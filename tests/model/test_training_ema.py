"""``training.train --ema-decay``: the exported checkpoint must be the running average of the weights, updated
after every step, and ``--raw-out`` the last step's own weights. A tiny run on the stand-in catalogue, a few
seconds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from tests.model.fixtures import TINY_TRAIN_ARGS
from training.train import main


def _weights(folder: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return {k: f.get_tensor(k).float() for k in f.keys()}, f.metadata()


def _train(tmp_path: Path, decay: str) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict[str, str]]:
    out, raw = tmp_path / f"ema{decay}", tmp_path / f"raw{decay}"
    main(TINY_TRAIN_ARGS + ["--out", str(out), "--raw-out", str(raw), "--ema-decay", decay])
    averaged, meta = _weights(out)
    last, _ = _weights(raw)
    return averaged, last, meta


@pytest.mark.parametrize("decay, same", [("1e-9", True), ("0.9", False)])
@pytest.mark.slow
def test_exported_weights_are_the_running_average(tmp_path: Path, decay: str, same: bool) -> None:
    averaged, last, meta = _train(tmp_path, decay)
    assert float(meta["ema_decay"]) == float(decay) and meta["final"] == "true"
    # a decay of ~0 makes the average the last step's weights, which holds only if it was updated every step
    # (never updated, it would still be the initial weights); 0.9 keeps most of the earlier steps
    differs = [k for k in last if not torch.equal(averaged[k], last[k])]
    assert (not differs) if same else len(differs) > len(last) // 2


@pytest.mark.slow
def test_also_ema_writes_each_average_with_its_decay(tmp_path: Path) -> None:
    """``--also-ema`` keeps extra averages beside the main one: a decay of ~0 must equal the last step's
    weights, and the same decay as ``--ema-decay`` must equal the main export bit for bit."""
    out, raw, near_zero, same = (tmp_path / n for n in ("ema", "raw", "near_zero", "same"))
    main(TINY_TRAIN_ARGS + ["--out", str(out), "--raw-out", str(raw), "--ema-decay", "0.9",
                 "--also-ema", f"1e-9={near_zero}", "--also-ema", f"0.9={same}"])
    last, _ = _weights(raw)
    averaged, _ = _weights(out)
    zero_avg, zero_meta = _weights(near_zero)
    same_avg, same_meta = _weights(same)
    assert float(zero_meta["ema_decay"]) == 1e-9 and float(same_meta["ema_decay"]) == 0.9
    assert all(torch.equal(zero_avg[k], last[k]) for k in last)
    assert all(torch.equal(same_avg[k], averaged[k]) for k in averaged)
    assert any(not torch.equal(averaged[k], last[k]) for k in last)


@pytest.mark.parametrize("spec", ["0.99", "1.5=x", "abc=x", "0.99="])
def test_also_ema_rejects_a_malformed_spec(spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(TINY_TRAIN_ARGS + ["--out", "unused", "--also-ema", spec])
    assert "--also-ema wants DECAY=DIR" in capsys.readouterr().err
