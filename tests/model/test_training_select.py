"""``training.select``: candidates are ranked on validation cases only, by the rule stated in its docstring."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from training.select import (
    ValidationScore,
    check_unique_names,
    main,
    parse_candidate,
    parse_range,
    same_weights_notes,
    weights_digest,
)


def _score(name: str, f1: float, schema: float, agent: float, case: float, digest: str = "") -> ValidationScore:
    return ValidationScore(name=name, folder=name, trigger_f1=f1, schema_accuracy=schema, schema_calls=100,
                           agent_success=agent, agent_tasks=20, case_accuracy=case, n_cases=600, outcomes={},
                           weights_sha256=digest)


def _write_earlier(path: Path, scores: list[ValidationScore]) -> Path:
    """An earlier --out of training.select, validated on the default cases, seeds and horizon."""
    path.write_text(json.dumps({"cases": "300:900", "agent_seeds": [5, 6, 7, 8, 9], "horizon": 10,
                                "scores": [asdict(s) for s in scores]}))
    return path


def test_rank_prefers_bars_met_then_the_nearest_missed_bar_then_case_accuracy() -> None:
    two_bars = _score("two", 0.96, 0.95, 0.90, 0.50)       # misses schema only
    one_bar_better_cases = _score("one", 0.94, 0.96, 0.95, 0.70)
    assert two_bars.rank_key() > one_bar_better_cases.rank_key()
    nearer = _score("nearer", 0.96, 0.965, 0.90, 0.40)     # same bars met, schema closer to 0.97
    assert nearer.rank_key() > two_bars.rank_key()
    tie = _score("tie", 0.96, 0.965, 0.90, 0.45)
    assert tie.rank_key() > nearer.rank_key()


def test_candidate_and_range_parsing(tmp_path: Path) -> None:
    assert parse_candidate("shipped").folder is None
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert parse_candidate(f"avg={tmp_path}").name == "avg"
    assert parse_candidate(str(tmp_path)).name == tmp_path.name
    with pytest.raises(ValueError, match="no model.safetensors"):
        parse_candidate(str(tmp_path / "missing"))
    assert parse_range("300:900") == slice(300, 900)
    with pytest.raises(ValueError, match="START:STOP"):
        parse_range("900:300")


@pytest.mark.parametrize("extra", [["--cases", "0:300"], ["--agent-seeds", "0,5"]])
def test_validation_refuses_the_reported_cases(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["shipped", *extra])
    assert "must not touch the reported cases" in capsys.readouterr().err


@pytest.mark.slow
def test_scores_the_shipped_model_through_the_engine(tmp_path: Path) -> None:
    """End to end on a few validation cases and one short agent task per environment, through the real
    HTTP server: the figures must come from the model's answers, and the chosen name must be a candidate."""
    out = tmp_path / "select.json"
    main(["shipped", "--cases", "300:330", "--agent-seeds", "5", "--agent-horizon", "6", "--out", str(out)])
    result = json.loads(out.read_text())
    (only,) = result["scores"]
    assert result["chosen"] == "shipped" and only["n_cases"] == 30 and only["agent_tasks"] == 4
    assert sum(sum(kind.values()) for kind in only["outcomes"].values()) == 30
    assert 0.0 < only["trigger_f1"] <= 1.0 and only["schema_calls"] > 0
    assert only["weights_sha256"] == weights_digest(None) and len(only["weights_sha256"]) == 64


def test_earlier_scores_join_the_ranking_only_if_measured_alike(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    earlier = _write_earlier(tmp_path / "earlier.json",
                             [_score("weak", 0.90, 0.90, 0.80, 0.60), _score("strong", 0.96, 0.97, 0.90, 0.50)])
    out = tmp_path / "ranked.json"
    main(["--include", str(earlier), "--out", str(out)])
    assert json.loads(out.read_text())["chosen"] == "strong"
    with pytest.raises(SystemExit):
        main(["--include", str(earlier), "--cases", "300:600"])
    assert "scored on cases 300:900" in capsys.readouterr().err


def test_names_are_unique_and_repeated_weights_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An earlier file's "shipped" is an older model: a new "shipped" beside it is refused, not silently mixed;
    the same weights under two names (an export and the model shipped from it) are pointed out."""
    with pytest.raises(ValueError, match="two candidates are named 'shipped'"):
        check_unique_names([("shipped", "shipped"), ("run-ema", "/r/ema"), ("shipped", "shipped")])
    check_unique_names([("a", "/a"), ("b", "/b")])
    scores = [_score("ema", 0.9, 0.9, 0.9, 0.5, "d1"), _score("old", 0.9, 0.9, 0.9, 0.5, ""),
              _score("new-shipped", 0.9, 0.9, 0.9, 0.5, "d1"), _score("raw", 0.9, 0.9, 0.9, 0.5, "d2")]
    assert same_weights_notes(scores) == ["new-shipped and ema are the same weights"]

    earlier = _write_earlier(tmp_path / "earlier.json", [_score("shipped", 0.9, 0.9, 0.9, 0.5)])
    with pytest.raises(SystemExit):
        main(["shipped", "--include", str(earlier)])
    assert "two candidates are named 'shipped'" in capsys.readouterr().err
