"""Which scored disagreements are real: a disagreement is a *different outcome*, never two identical replies.

Why here, at the point the report composes them: the scoring modules (``verifier.kinds.*.scoring``) list every
case a check flagged, and a case where both endpoints fail the schema the same way (same calls, same arguments,
same text) is flagged for both. Those rows say nothing about the candidate, so the report drops them before it
counts or shows anything (``reports.suite_view`` for the counts, ``reports.report_view`` for the listed rows).
The layering rules keep ``verifier.kinds`` from importing ``reports``; should scoring want the same test, this
module imports only ``verifier.run.summary`` and can move beside it unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from verifier.run.summary import Disagreement

__all__ = ["is_identical", "real_disagreements"]


def _canonical(text: str | None) -> str | None:
    """The reply as compared: JSON by value (key order and spacing do not count), other text by its words."""
    if text is None:
        return None
    stripped = text.strip()
    try:
        return json.dumps(json.loads(stripped), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return " ".join(stripped.split())


def is_identical(d: Disagreement) -> bool:
    """True when the reference's and the candidate's replies are the same (no different outcome to show)."""
    return d.reference is not None and d.candidate is not None and _canonical(d.reference) == _canonical(d.candidate)


def real_disagreements(ds: Iterable[Disagreement]) -> list[Disagreement]:
    """The disagreements whose replies differ, in their scored order."""
    return [d for d in ds if not is_identical(d)]
