"""Shared pieces of the model tests."""

from __future__ import annotations

#: a `training.train` command line that trains a one-layer model on the stand-in catalogue in a few seconds: for
#: tests of what a run writes (exports, averages, metadata), never of what it learns
TINY_TRAIN_ARGS = ["--n-toolcall", "120", "--n-agent", "12", "--steps", "4", "--hidden", "32", "--intermediate", "64",
                   "--layers", "1", "--heads", "2", "--kv-heads", "1", "--batch-tokens", "512", "--allow-standin"]

#: a one-layer architecture for tests that train only to compare runs with each other (same losses from a prepared
#: corpus, a seed that changes them): the comparison holds for any size, and this one steps ~4x faster than the default
TOY_ARCH_ARGS = ["--hidden", "32", "--intermediate", "64", "--layers", "1", "--heads", "2", "--kv-heads", "1",
                 "--batch-tokens", "512"]
