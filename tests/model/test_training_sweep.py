"""Recipe sweeps: the prepared corpus replays a fresh run exactly, the schedules, and the sweep driver itself."""

from __future__ import annotations

import json
import tarfile

import numpy as np
import pytest

from tests.model.fixtures import TOY_ARCH_ARGS
from training.sweep import main as sweep_main
from training.sweep import parse_run
from training.train import lr_at
from training.train import main as train_main

SMALL = ["--n-toolcall", "60", "--n-agent", "6", "--seed", "11"]
ARCH = " ".join(TOY_ARCH_ARGS)


def test_wsd_holds_the_peak_then_decays_to_zero_over_the_last_quarter() -> None:
    peak, warmup = 1e-3, 10
    assert lr_at(0.0, 0, peak, warmup, "wsd") == pytest.approx(peak / warmup)
    assert lr_at(0.5, 500, peak, warmup, "wsd") == pytest.approx(peak)
    assert lr_at(0.75, 750, peak, warmup, "wsd") == pytest.approx(peak)
    assert lr_at(0.875, 875, peak, warmup, "wsd") == pytest.approx(peak / 2)
    assert lr_at(1.0, 1000, peak, warmup, "wsd") == pytest.approx(0.0)
    # the cosine default is unchanged: peak after warmup, 10 % at the end
    assert lr_at(0.0, 10, peak, warmup) == pytest.approx(peak)
    assert lr_at(1.0, 1000, peak, warmup) == pytest.approx(0.1 * peak)


def _losses(log: str) -> list[str]:
    return [line.split(" ema ")[0] for line in log.splitlines() if line.startswith("step ")]


def _corpus_line(log: str) -> str:
    """The corpus summary (vocabulary, documents, tokens) without its timing."""
    line = next((ln for ln in log.splitlines() if ln.startswith("tokenizer: ")), "")
    return line.rsplit(" (", 1)[0]


@pytest.mark.slow
def test_a_prepared_corpus_trains_exactly_like_a_fresh_one(tmp_path, capsys) -> None:
    """Same tokenizer, same documents, same loss at every logged step: sweeps compare recipes, not corpora."""
    run = [*SMALL, "--steps", "25", "--time-limit-min", "5", "--threads", "1", *TOY_ARCH_ARGS]
    train_main([*run, "--out", str(tmp_path / "fresh")])
    fresh = capsys.readouterr().out
    train_main([*SMALL, "--prepared", str(tmp_path / "prep"), "--prepare-only"])
    meta = json.loads((tmp_path / "prep" / "corpus.json").read_text())
    # the default recipe's contrast twins and agent slips
    assert meta == {"n_toolcall": 60, "n_agent": 6, "seed": 11, "contrast_share": 0.3, "agent_slip_share": 0.3}
    with np.load(tmp_path / "prep" / "docs.npz") as z:
        assert z["ids"].dtype == np.uint16 and z["ids"].size == z["mask"].size == z["lengths"].sum()
    capsys.readouterr()
    train_main([*run, "--prepared", str(tmp_path / "prep"), "--out", str(tmp_path / "cached")])
    cached = capsys.readouterr().out
    assert "prepared corpus from" in cached
    assert _losses(fresh) and _losses(fresh) == _losses(cached)
    assert (tmp_path / "fresh" / "tokenizer.json").read_text() == (tmp_path / "cached" / "tokenizer.json").read_text()


def test_a_prepared_corpus_refuses_other_corpus_arguments(tmp_path) -> None:
    train_main([*SMALL, "--prepared", str(tmp_path / "prep"), "--prepare-only"])
    with pytest.raises(SystemExit, match="corpus.json: prepared for .*'n_toolcall': 60.*not for this run's"):
        train_main(["--n-toolcall", "61", "--n-agent", "6", "--seed", "11", "--prepared", str(tmp_path / "prep"),
                    "--prepare-only"])


@pytest.mark.slow
def test_a_prepared_corpus_keeps_the_schema_mask(tmp_path, capsys) -> None:
    """``--schema-weight`` trains the same from a prepared corpus as from a fresh one, and a corpus prepared before
    the mask was stored is refused for it (and still serves runs that do not weigh it)."""
    run = [*SMALL, "--steps", "12", "--time-limit-min", "5", "--threads", "1", "--schema-weight", "3", *TOY_ARCH_ARGS]
    train_main([*run, "--out", str(tmp_path / "fresh")])
    fresh = capsys.readouterr().out
    train_main([*run, "--prepared", str(tmp_path / "prep"), "--out", str(tmp_path / "cached")])
    cached = capsys.readouterr().out
    assert _losses(fresh) and _losses(fresh) == _losses(cached)
    unweighted = [*SMALL, "--steps", "12", "--time-limit-min", "5", "--threads", "1", "--schema-weight", "1",
                  *TOY_ARCH_ARGS]
    train_main([*unweighted, "--out", str(tmp_path / "plain")])
    assert _losses(capsys.readouterr().out) != _losses(fresh)
    npz = tmp_path / "prep" / "docs.npz"
    with np.load(npz) as z:
        older = {k: z[k] for k in z.files if k != "schema"}
    np.savez_compressed(npz, **older)
    with pytest.raises(SystemExit, match="prepared without schema masks"):
        train_main([*run, "--prepared", str(tmp_path / "prep"), "--out", str(tmp_path / "again")])
    train_main([*unweighted, "--prepared", str(tmp_path / "prep"), "--out", str(tmp_path / "old")])


@pytest.mark.slow
def test_init_seed_changes_the_run_but_not_the_corpus(tmp_path, capsys) -> None:
    train_main([*SMALL, "--prepared", str(tmp_path / "prep"), "--prepare-only"])
    common = [*SMALL, "--prepared", str(tmp_path / "prep"), "--steps", "5", "--time-limit-min", "5", "--threads", "1",
              *TOY_ARCH_ARGS]
    capsys.readouterr()
    train_main([*common, "--out", str(tmp_path / "a")])
    first = capsys.readouterr().out
    train_main([*common, "--init-seed", "99", "--out", str(tmp_path / "b")])
    second = capsys.readouterr().out
    assert _losses(first) != _losses(second)
    assert _corpus_line(first) and _corpus_line(first) == _corpus_line(second)


def test_run_specs_need_a_plain_name(tmp_path) -> None:
    run = parse_run("wsd=--steps 100 --schedule wsd", tmp_path)
    assert run.name == "wsd" and run.args == ["--steps", "100", "--schedule", "wsd"]
    assert run.out == tmp_path / "wsd"
    with pytest.raises(SystemExit, match="expected NAME="):
        parse_run("--steps 100", tmp_path)
    with pytest.raises(SystemExit, match="expected NAME="):
        parse_run("a/b=--steps 100", tmp_path)


@pytest.mark.slow
def test_sweep_trains_each_recipe_and_bundles_checkpoint_and_log(tmp_path, capsys) -> None:
    sweep_main(["--work", str(tmp_path / "work"), "--device", "cpu", "--time-limit-min", "3",
                "--bundle-to", str(tmp_path / "out"), "--corpus-args", " ".join(SMALL),
                f"cos=--steps 6 {ARCH}", f"wsd=--steps 6 --schedule wsd {ARCH}"])
    report = capsys.readouterr().out
    assert "cos: ok; step 6/6" in report and "wsd: ok; step 6/6" in report
    for name in ("cos", "wsd"):
        with tarfile.open(tmp_path / "out" / f"{name}.tar.gz") as tar:
            names = set(tar.getnames())
        assert {f"{name}/train.log", f"{name}/model/model.safetensors", f"{name}/model/tokenizer.json"} <= names


@pytest.mark.slow
def test_a_failed_run_is_reported_with_its_log(tmp_path, capsys) -> None:
    sweep_main(["--work", str(tmp_path / "work"), "--device", "cpu", "--time-limit-min", "3",
                "--corpus-args", " ".join(SMALL), "bad=--schedule nonsense"])
    report = capsys.readouterr().out
    assert "bad: exit 2" in report and "invalid choice: 'nonsense'" in report
