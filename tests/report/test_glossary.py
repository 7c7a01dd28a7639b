"""Every metric name a summary can contain has a glossary entry (by name or by family).

The names are collected from the code that writes them, not from a list kept beside the glossary: every string
literal the scoring modules use as a ``metrics[...]`` key or return from a ``metrics()`` method, the gate's
metric table, and the families built with f-strings (percentiles, paths, stream variants, pass^k, expected_*).
A new metric written without an entry fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from reports.glossary import describe_test, entry, glossary_id
from verifier.history.gate import METRICS
from verifier.kinds.logprob.stats import KL_PERCENTILES

KINDS = Path(__file__).resolve().parents[2] / "verifier" / "kinds"


def _literal_metric_keys() -> set[str]:
    """String keys written into a ``metrics`` mapping anywhere under verifier/kinds."""
    names: set[str] = set()
    for path in KINDS.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                    and isinstance(node.slice.value, str)):
                target = node.value
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name == "metrics" and isinstance(node.ctx, ast.Store):
                    names.add(node.slice.value)
            if isinstance(node, ast.FunctionDef) and node.name == "metrics":  # a block's metrics() -> dict
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Dict):
                        names |= {k.value for k in sub.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                    if (isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store)
                            and isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, str)):
                        names.add(sub.slice.value)
    return names


def _family_names() -> set[str]:
    logprob = {"kl_mean", "kl_median", "kl_max", "kl_lower_mean", "same_top", "delta_p_rms", "delta_p_mean",
               "ln_ppl_ratio", *(f"kl_p{q:g}" for q in KL_PERCENTILES if q != 50)}
    names = set(logprob) | {f"{path}_{m}" for path in ("forced", "decode") for m in logprob}
    names |= {f"{t}_p{q}_s" for t in ("latency", "ttft", "itl") for q in (50, 95, 99)} | {"tpot_p50_s", "tpot_p95_s"}
    names |= {f"{m}_{v}" for m in ("schema_accuracy", "error_rate", "trigger_rate") for v in ("stream", "nonstream")}
    names |= {f"pass^{k}" for k in range(1, 9)}
    names |= {f"expected_{b}" for b in ("tool_accuracy", "args_exact", "args_bfcl", "case_accuracy", "trigger_f1")}
    return names


def test_every_metric_a_summary_can_hold_has_an_entry() -> None:
    literal = _literal_metric_keys()
    assert {"greedy_diverged", "endpoint_error_rate", "prompt_tokens_accepted", "cache_bound"} <= literal
    names = literal | set(METRICS) | _family_names()
    missing = sorted(n for n in names if entry(n) is None)
    assert not missing, f"metrics without a glossary entry: {missing}"


def test_an_unknown_name_has_no_entry_so_the_check_can_fail() -> None:
    assert entry("made_up_metric") is None and entry("forced_made_up") is None and entry("expected_nothing") is None
    assert entry("kl_p99.9") and "99.9th percentile" in entry("kl_p99.9")  # type: ignore[operator]
    assert glossary_id("pass^3") == "g-pass-k"


def test_test_names_in_words() -> None:
    assert describe_test("mcnemar") == "McNemar's test on paired cases"
    assert "cluster-robust" in describe_test("cluster_robust")
    assert describe_test("new_test") == "new test"
