"""Which cases the reference answers twice, and how such second answers are told apart in ``records.jsonl``.

Why: trigger F1 and argument agreement against the reference are below 1 even for a perfect twin when the
reference samples (many providers do, even at temperature 0). The reference's second answer to a case, scored
against its first, is what a twin would reach: the floor the candidate is judged against
(:mod:`verifier.kinds.toolcall.headlines`).

Which cases: a seeded share of the suite's cases (``--reference-repeat-share``, default 50 %, at least
:data:`MIN_CASES` cases or every case when the suite has fewer; 0 turns it off), chosen by a hash of
``(seed, case id)`` so the choice does not depend on the order of the suite, and made on the whole (limited)
suite *before* ``--shard`` splits it, so every shard agrees on it and ``verifier merge`` joins the same set.

How they are stored: one more record per chosen case (and stream variant) for the reference endpoint, with
``repeat`` equal to the run's ``--repeats`` (the first index no regular repeat uses, so the record has its own
``--resume`` key) and ``extra["reference_repeat_of"] = 0`` (the repeat it answers again). Scoring leaves such
records out of every metric except the floor.

Why half by default: the floor is measured on the repeated cases only, so its noise dominates the difference the
two headlines are judged on. With 10 % (200 of 2,000 cases) a 10-point drop in trigger F1 or argument agreement
was found 19-30 % of the time and a faithful sampling twin was shown ``consistent`` 7-19 % of the time; with
50 % the same worlds give 83-95 % and 98-99.5 % (``benchmarks/results/verdict_calibration.md``). The price is
the reference answering half of a tool-call suite twice; ``--reference-repeat-share 0.1`` buys it back where
the reference is known to be deterministic or only large differences matter.

Why the second request differs in ``user`` (:func:`repeat_body`): a provider, gateway or proxy that caches whole
responses keyed on the request body would serve a byte-identical repeat from its cache, making the floor look
perfect from nothing. The OpenAI ``user`` field (an end-user id) is part of such a key but not of the prompt the model
sees, so the repeat asks the model exactly the same thing and still misses the cache. The first answers' requests are
not touched: their bodies, ``--resume`` keys and request hashes stay what they were. A cache that ignores ``user``
still shows up: :mod:`verifier.kinds.toolcall.headlines` counts second answers that carry the first answer's
response ``id``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

from verifier.records import ExchangeRecord

DEFAULT_SHARE = 0.50
MIN_CASES = 50
OPTION = "reference_repeat_share"  # kind option (set by --reference-repeat-share), recorded in the run settings
MARKER = "reference_repeat_of"  # ExchangeRecord.extra key: the repeat index this record answers again
#: The request field that keeps a repeat out of a response cache; metadata for the provider, never in the prompt.
CACHE_BUST_FIELD = "user"
CACHE_BUST_VALUE = "verifier-reference-repeat"


def share_option(options: dict[str, Any]) -> float:
    """The share asked for (default :data:`DEFAULT_SHARE`); anything but a number in [0, 1] is one clear error."""
    raw = options.get(OPTION, DEFAULT_SHARE)
    try:
        share = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"option {OPTION}: expected a number between 0 and 1, got {raw!r}") from None
    if not 0.0 <= share <= 1.0 or math.isnan(share):
        raise ValueError(f"option {OPTION}: expected a number between 0 and 1, got {raw!r}")
    return share


def choose(case_ids: Sequence[str], share: float, seed: int) -> frozenset[str]:
    """The cases the reference answers twice: ``max(ceil(share * N), min(MIN_CASES, N))`` of N, 0 when share is 0.

    Ranked by sha256 of ``seed:case_id`` (stable across processes and shards, unlike Python's ``hash``).
    """
    ids = list(dict.fromkeys(case_ids))
    if share <= 0 or not ids:
        return frozenset()
    count = min(len(ids), max(math.ceil(share * len(ids)), min(MIN_CASES, len(ids))))
    rank = sorted(ids, key=lambda cid: hashlib.sha256(f"{seed}:{cid}".encode()).hexdigest())
    return frozenset(rank[:count])


def repeat_body(body: dict[str, Any]) -> dict[str, Any]:
    """The body of a reference repeat: ``body`` with :data:`CACHE_BUST_FIELD` set, nothing else changed.

    An existing ``user`` string keeps its value as a prefix (``alice/verifier-reference-repeat``), so a provider
    that accounts per end user still sees whose request it is; a new key goes last, every other key keeps its place
    (chat templates render in key order).
    """
    own = body.get(CACHE_BUST_FIELD)
    value = f"{own}/{CACHE_BUST_VALUE}" if isinstance(own, str) and own else CACHE_BUST_VALUE
    return {**body, CACHE_BUST_FIELD: value}


def is_reference_repeat(record: ExchangeRecord) -> bool:
    """True for the reference's second answer to a case (kept out of every metric but the floor)."""
    return MARKER in record.extra
