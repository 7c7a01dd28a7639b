"""How deep a JSON text nests, measured without parsing it.

Why: Python's ``json`` module, ``jsonschema`` and every recursive comparison recurse once (or more) per level, so
tool-call arguments nested ~1,000 deep raised ``RecursionError`` while scoring and ended the whole suite. The client
reads the depth of each call's arguments first (a provider's reply that deep is ``malformed_response`` for that one
exchange) and the scorers refuse such text the same way, so nothing downstream ever recurses that far.
"""

from __future__ import annotations

import re
from itertools import accumulate

#: Deepest nesting of tool-call arguments that is read as JSON. Real tool schemas nest a handful of levels; 100
#: keeps every recursive reader (json, jsonschema, argument comparison) far below Python's recursion limit.
MAX_ARGUMENT_DEPTH = 100

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def nesting_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of ``text`` read as JSON (brackets inside strings do not count).

    Text after an unterminated string is not counted: a JSON parser stops there too. Malformed text gets an
    upper bound, which is all a guard needs.
    """
    if "[" not in text and "{" not in text:
        return 0
    bare = _STRING.sub("", text)
    quote = bare.find('"')
    if quote >= 0:
        bare = bare[:quote]
    steps = (1 if b in "[{" else -1 for b in _BRACKETS.findall(bare))
    return max(accumulate(steps), default=0)


def too_deep(text: str) -> bool:
    """True when ``text`` nests deeper than :data:`MAX_ARGUMENT_DEPTH`."""
    return nesting_depth(text) > MAX_ARGUMENT_DEPTH
