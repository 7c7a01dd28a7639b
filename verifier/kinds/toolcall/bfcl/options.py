"""BFCL's possible-answer rule: does one call's arguments match a BFCL answer's option lists?

Why this module: BFCL does not give one right answer per parameter but a list of acceptable values
(``{"unit": ["", "cm"]}``: omitted, or ``"cm"``), and nested objects keep option lists at every key
(``{"params": [{"limit": [50], "schemaFilter": ["public"]}]}``). Flattening that to one value makes
some answers impossible to match, so imported suites carry the lists in ``_meta.expected.options`` and
the scorer asks this module. The rule follows BFCL's AST checker (``ast_checker.py``), read not copied:

- a parameter the call gives must be in the answer; one it leaves out must list ``""`` (may be omitted);
- strings match after BFCL's standardisation: spaces and ``, . / - _ * ^`` removed, lower case,
  ``'`` read as ``"``;
- lists match one option element by element (strings standardised), lists of objects object by object;
- objects match one option object: each key given must be in it and match its list, each key left out
  must list ``""``;
- numbers compare by value (an integer matches ``5.0``), booleans only booleans.

Java/JavaScript parameters are strings on the wire (BFCL types them so); the importer renders their
options as the source text BFCL's converters read, so they are compared with the string rule here.
"""

from __future__ import annotations

import re
from typing import Any

_BFCL_STRIP = re.compile(r"[ ,./\-_*^]")


def standardize(text: str) -> str:
    """BFCL's string standardisation (so ``April 1, 2024`` and ``april 1 2024`` agree)."""
    return _BFCL_STRIP.sub("", text).lower().replace("'", '"')


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _same_element(value: Any, option: Any) -> bool:
    """One list element against one option element: strings standardised, numbers by value."""
    if isinstance(value, str) and isinstance(option, str):
        return standardize(value) == standardize(option)
    if isinstance(option, dict) and isinstance(value, dict):
        return dict_matches(value, option)
    if isinstance(value, bool) or isinstance(option, bool):
        return isinstance(value, bool) and isinstance(option, bool) and value == option
    if _is_number(value) and _is_number(option):
        return float(value) == float(option)
    if isinstance(value, list) and isinstance(option, list):
        return len(value) == len(option) and all(_same_element(v, o) for v, o in zip(value, option))
    return value == option and type(value) is type(option)


def value_matches(value: Any, options: list[Any]) -> bool:
    """Is ``value`` one of ``options`` (one parameter's acceptable values, ``""`` = may be omitted)?"""
    for option in options:
        if option == "" and not (isinstance(value, str) and value == ""):
            continue
        if isinstance(value, dict):
            if isinstance(option, dict) and dict_matches(value, option):
                return True
        elif isinstance(value, list):
            if isinstance(option, list) and len(option) == len(value) and all(
                    _same_element(v, o) for v, o in zip(value, option)):
                return True
        elif _same_element(value, option):
            return True
    return False


def dict_matches(value: dict[str, Any], option: dict[str, Any]) -> bool:
    """An object against one option object whose values are option lists (BFCL's nested answers).

    A value that is not a list is one literal value: BFCL's data mixes the two forms
    (``{"position": [{"lateral": 10.5}]}``), and its checker then compares by equality.
    """
    for key, item in value.items():
        if key not in option:
            return False
        choices = option[key]
        ok = value_matches(item, choices) if isinstance(choices, list) else _same_element(item, choices)
        if not ok:
            return False
    return all(key in value or (isinstance(choices, list) and "" in choices) for key, choices in option.items())


def args_match_options(arguments: Any, options: dict[str, list[Any]]) -> bool:
    """A call's arguments against a BFCL answer: every given parameter acceptable, every omitted one optional."""
    return isinstance(arguments, dict) and dict_matches(arguments, options)
