"""JSON Schema handling shared by suite loading and scoring: one draft rule, memoised.

Why one module: the loader (is this tool's ``parameters`` a valid schema?), our own ``schema_accuracy`` and
K2VV's rule must agree on which draft a schema is written in and on whether it is valid, or the same tool
would be "invalid" in ``input_problems`` and "valid" in a metric. The rule is jsonschema's own: the draft
named by ``$schema``, Draft 2020-12 when there is none (or it is unknown), and the schema checked against
that draft's metaschema. Suites offer the same few tools on thousands of lines, so both the check and the
validator are cached by the schema's canonical JSON.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from jsonschema import FormatChecker
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import Draft202012Validator, validator_for

#: The draft used when a schema does not name one with ``$schema`` (jsonschema's own default, pinned).
DEFAULT_DRAFT = Draft202012Validator

_PROBLEMS: dict[str, str | None] = {}
_VALIDATORS: dict[tuple[str, int], Validator] = {}


def _key(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, ensure_ascii=False)


def draft_for(schema: Any) -> type[Validator]:
    """The validator class for ``schema``: from ``$schema``, else :data:`DEFAULT_DRAFT`."""
    with warnings.catch_warnings():  # an unknown $schema falls back to the default with a DeprecationWarning
        warnings.simplefilter("ignore", DeprecationWarning)
        return validator_for(schema, default=DEFAULT_DRAFT)


def schema_problem(schema: Any) -> str | None:
    """None when ``schema`` is a valid JSON Schema for its draft, else one line saying why not.

    Anything that is not an object or a boolean is not a schema; a ``$schema`` that is not a string, or
    any other failure of the check itself, is reported as a problem rather than raised.
    """
    key = _key(schema)
    if key not in _PROBLEMS:
        if not isinstance(schema, (dict, bool)):
            problem: str | None = f"a JSON Schema is an object or a boolean, not {type(schema).__name__}"
        else:
            try:
                draft_for(schema).check_schema(schema)
                problem = None
            except SchemaError as exc:
                problem = exc.message
            except Exception as exc:  # noqa: BLE001 - e.g. an unhashable $schema: still just a bad schema
                problem = f"{type(exc).__name__}: {exc}"
        _PROBLEMS[key] = problem.replace("\n", " ")[:300] if problem else None
    return _PROBLEMS[key]


def validator(schema: Any, format_checker: FormatChecker | None = None) -> Validator:
    """A validator for a schema that passed :func:`schema_problem` (cached per schema and format checker)."""
    k = (_key(schema), id(format_checker))
    v = _VALIDATORS.get(k)
    if v is None:
        v = draft_for(schema)(schema, format_checker=format_checker)
        _VALIDATORS[k] = v
    return v
