"""How deep a JSON text nests, measured without parsing it.

Why: Python's ``json`` module, ``jsonschema`` and every recursive comparison recurse once (or more) per level, so
tool-call arguments nested ~1,000 deep raised ``RecursionError`` while scoring and ended the whole suite. The client
reads the depth of each call's arguments first (a provider's reply that deep is ``malformed_response`` for that one
exchange) and the scorers refuse such text the same way, so nothing downstream ever recurses that far.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import accumulate

#: Deepest nesting of tool-call arguments that is read as JSON. Real tool schemas nest a handful of levels; 100
#: keeps every recursive reader (json, jsonschema, argument comparison) far below Python's recursion limit.
MAX_ARGUMENT_DEPTH = 100

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def _depths(text: str) -> Iterator[int]:
    """The nesting depth after each bracket of ``text`` read as JSON (brackets inside strings do not count), lazily:
    a reader that stops at the first level too deep scans a 1 MB bracket bomb in ~10 ms."""
    bare = _STRING.sub("", text)
    quote = bare.find('"')  # an unterminated string: a JSON parser stops there too
    if quote >= 0:
        bare = bare[:quote]
    return accumulate(1 if m.group() in "[{" else -1 for m in _BRACKETS.finditer(bare))


def nesting_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of ``text`` read as JSON (brackets inside strings do not count).

    Malformed text gets an upper bound, which is all a guard needs.
    """
    if "[" not in text and "{" not in text:
        return 0
    return max(_depths(text), default=0)


def too_deep(text: str) -> bool:
    """True when ``text`` nests deeper than :data:`MAX_ARGUMENT_DEPTH`.

    Counting brackets first answers for almost every reply (it runs on every call the client reads): text with no
    more opening brackets than the limit cannot nest deeper. Otherwise the scan stops at the first level too deep.
    """
    if text.count("[") + text.count("{") <= MAX_ARGUMENT_DEPTH:
        return False
    return any(d > MAX_ARGUMENT_DEPTH for d in _depths(text))
