"""``python -m training.train`` with no options must retrain the shipped recipe: the README and MODEL_CARD.md
promise that one command reproduces the checkpoint, and v6 changed two defaults (optimizer, agent share). The
final checkpoint records its recipe in the safetensors metadata, so the defaults are checked against it."""

from __future__ import annotations

from safetensors import safe_open

from training.train import RECIPE_OPTIONS, SHIPPED_CHECKPOINT, build_parser, recipe_metadata


def test_defaults_equal_the_recipe_recorded_in_the_shipped_checkpoint() -> None:
    with safe_open(str(SHIPPED_CHECKPOINT), "pt") as f:
        recorded = f.metadata()
    assert recorded.get("final") == "true"
    defaults = recipe_metadata(build_parser().parse_args([]))
    # checkpoints before the full recipe was recorded hold only some of the options; the ones that define v6
    # (optimizer, decision weight, contrast twins, seeds, batch shape) are among them
    shared = sorted(set(recorded) & set(RECIPE_OPTIONS))
    assert {"optimizer", "seed", "init_seed", "decision_weight", "contrast_share", "batch_tokens"} <= set(shared)
    assert {k: defaults[k] for k in shared} == {k: recorded[k] for k in shared}


def test_recipe_metadata_records_every_recipe_option_as_text() -> None:
    args = build_parser().parse_args(["--n-agent", "14400", "--optimizer", "adamw", "--wide-small-talk"])
    meta = recipe_metadata(args)
    assert set(meta) == set(RECIPE_OPTIONS)
    assert (meta["n_agent"], meta["optimizer"], meta["wide_small_talk"]) == ("14400", "adamw", "True")
    assert all(isinstance(v, str) for v in meta.values())
    # every recorded name is a real option of the command line (a typo would record nothing useful)
    assert set(RECIPE_OPTIONS) <= set(vars(build_parser().parse_args([])))
