"""``--shard I/N``: which cases of a suite one of N runners sends.

Why a hash of the case id and not a slice of the case list: a slice (cases ``i::N`` or the i-th block) moves
every case to another shard as soon as a suite grows, so yesterday's shard 2 and today's shard 2 would not
hold the same cases and a per-shard comparison (or a re-run of one failed shard against yesterday's merge)
would mix different work. A hash of the id alone puts a case in the same shard whatever else the suite holds.

What is kept whole: the unit that is sharded is a suite *case* (``suite.cases``), so everything a kind does
for one case stays in one shard: every repeat and stream variant of a tool-call case, every trial and step of
an agent scenario, every turn of a cache session, every method of a logprob case. Work a kind does once per
endpoint rather than per case (the logprob method probe) is done by every shard; ``verifier merge`` keeps one.

A kind whose cases carry their identity elsewhere than ``case.id`` may define ``shard_key(case) -> str`` on its
SuiteKind object; none needs to today.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
from dataclasses import dataclass
from typing import Any

_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class ShardSpecError(ValueError):
    """A ``--shard`` value that is not ``I/N`` with 1 <= I <= N; the message is one line."""


@dataclass(frozen=True, order=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/3"`` -> Shard(2, 3); anything else raises :class:`ShardSpecError` naming the value."""
        m = _SHARD_RE.match(str(text))
        if not m:
            raise ShardSpecError(f"--shard {text!r}: expected I/N, e.g. 2/3")
        index, count = int(m.group(1)), int(m.group(2))
        if count < 1:
            raise ShardSpecError(f"--shard {text!r}: N must be at least 1")
        if not 1 <= index <= count:
            raise ShardSpecError(f"--shard {text!r}: I must be between 1 and N ({count})")
        return cls(index, count)

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, case_id: str) -> bool:
        return shard_of(case_id, self.count) == self.index

    def __str__(self) -> str:
        return self.label


def shard_of(case_id: str, count: int) -> int:
    """The 1-based shard that owns ``case_id`` among ``count`` shards: a stable hash, not Python's ``hash()``
    (salted per process, so two runners would disagree)."""
    digest = hashlib.sha256(str(case_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def case_key(kind: Any, case: Any) -> str:
    """The identity a case is sharded by: the kind's ``shard_key(case)`` if it has one, else ``case.id``."""
    hook = getattr(kind, "shard_key", None)
    if hook is not None:
        return str(hook(case))
    return str(case.id)


def shard_suite(kind: Any, suite: Any, shard: Shard) -> Any:
    """A copy of the loaded ``suite`` holding only ``shard``'s cases; ``suite.manifest`` is kept as loaded.

    The manifest (name, content hash, case count) still describes the whole suite, on purpose: it is what
    ``verifier merge`` checks the shards against, and the shard itself is recorded in the run's settings.
    Works for any loaded suite with a ``cases`` list (a dataclass, a pydantic model, or a plain object).
    """
    cases = [c for c in suite.cases if shard.owns(case_key(kind, c))]
    if dataclasses.is_dataclass(suite) and not isinstance(suite, type):
        return dataclasses.replace(suite, cases=cases)
    if hasattr(suite, "model_copy"):
        return suite.model_copy(update={"cases": cases})
    out = copy.copy(suite)
    out.cases = cases
    return out
