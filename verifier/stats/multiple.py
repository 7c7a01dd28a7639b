"""Multiple testing: adjusted p-values for a family of tests run together.

Why a module of its own: drift (many metrics x endpoints each night) and the verdict (many metrics per candidate)
both gate a family of tests with a stated error rate, and they must adjust the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal


def adjust_pvalues(pvalues: Sequence[float], method: Literal["holm", "bh"]) -> list[float]:
    """Holm step-down or Benjamini-Hochberg step-up adjusted p-values (same order as given)."""
    n = len(pvalues)
    if n == 0:
        return []
    order = sorted(range(n), key=lambda i: pvalues[i])
    adj = [1.0] * n
    if method == "holm":
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (n - rank) * pvalues[i]))
            adj[i] = running
    elif method == "bh":
        running = 1.0
        for rank in range(n - 1, -1, -1):
            i = order[rank]
            running = min(running, min(1.0, pvalues[i] * n / (rank + 1)))
            adj[i] = running
    else:  # pragma: no cover - guarded by the Literal type
        raise ValueError(f"unknown multiplicity method {method!r}")
    return adj
