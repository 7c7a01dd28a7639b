"""The context a checkpoint declares is the one it was trained at, and the agent evaluation keeps inside it.

Why: verifier-tiny was trained on documents of at most 1,024 tokens. Declared as 2,048, the engine served it
prompts up to twice that long, and past 1,024 tokens its agents broke (horizon 25: 0 of 20 solved). Declared
truthfully, the engine refuses a longer prompt with a context-length error and the agent loop drops the
oldest turns, as the verifier's agent runner does for any small-context endpoint.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from reference_engine.launch import default_model_path, start_server
from tests.model.fixtures import TINY_TRAIN_ARGS
from training.evaluate import MODEL_ID, run_agent
from training.train import build_parser, main

MODEL_DIR: Path = default_model_path()
shipped = pytest.mark.skipif(not (MODEL_DIR / "model.safetensors").exists(), reason="shipped checkpoint not present")


def _declared_context(folder: Path) -> tuple[int, int]:
    config = json.loads((folder / "config.json").read_text())
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    return config["max_position_embeddings"], tokenizer_config["model_max_length"]


@pytest.mark.slow
def test_a_trained_checkpoint_declares_its_longest_training_document(tmp_path: Path) -> None:
    main(TINY_TRAIN_ARGS + ["--block", "512", "--out", str(tmp_path / "ckpt")])
    assert _declared_context(tmp_path / "ckpt") == (512, 512)


@shipped
def test_the_shipped_checkpoint_declares_the_context_it_was_trained_at() -> None:
    block = build_parser().get_default("block")
    assert _declared_context(MODEL_DIR) == (block, block)


@shipped
@pytest.mark.slow
def test_a_long_agent_task_is_trimmed_to_the_context_instead_of_ending_there() -> None:
    """Horizon 25 of tickets needs about 1,500 tokens of history: the loop must drop old turns and go on."""
    from suites.agent.scenarios import scenario

    with start_server(None) as srv:
        MODEL_ID[srv.base_url] = srv.model
        context = srv.engine.max_model_len
        [result] = asyncio.run(run_agent(srv.base_url, [scenario("tickets", 25, seed=1)]))
    assert context == build_parser().get_default("block")
    assert result.stop != "context_limit"
    assert result.trimmed_turns > 0
    assert result.steps > 20, result.transcript[-3:]
