"""JSON Schema handling shared by suite loading and scoring: one draft rule, memoised.

Why one module: the loader (is this tool's ``parameters`` a valid schema?), our own ``schema_accuracy`` and
K2VV's rule must agree on which draft a schema is written in and on whether it is valid, or the same tool
would be "invalid" in ``input_problems`` and "valid" in a metric. The rule is jsonschema's own: the draft
named by ``$schema``, Draft 2020-12 when there is none (or it is unknown), and the schema checked against
that draft's metaschema. Suites offer the same few tools on thousands of lines, so both the check and the
validator are cached by the schema's canonical JSON, and so is the outcome of validating one argument text against
one schema (:func:`first_error`): replies repeat the same few argument texts, and our rule and K2VV's both validate
every call (a 2,000-case simulation spent most of its time re-validating identical JSON).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import Any

from jsonschema import FormatChecker
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import Draft202012Validator, validator_for

#: The draft used when a schema does not name one with ``$schema`` (jsonschema's own default, pinned).
DEFAULT_DRAFT = Draft202012Validator

_PROBLEMS: dict[str, str | None] = {}
_VALIDATORS: dict[tuple[str, int], Validator] = {}
_JUDGED: dict[tuple[str, int, str], Judgement] = {}
#: Entries kept in the validation memo before it is emptied (bounds memory on suites with many distinct replies).
MAX_JUDGED = 100_000


_KEYS: dict[int, tuple[Any, str]] = {}  # id(schema) -> (schema, its key): the object is kept, so its id stays its own


def _key(schema: Any) -> str:
    """The schema's canonical JSON, the memos' key. Computed once per schema *object* (suites hand the same parsed
    ``parameters`` object to every call of a case, and schemas are never changed after a suite is loaded)."""
    hit = _KEYS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = json.dumps(schema, sort_keys=True, ensure_ascii=False)
    if isinstance(schema, (dict, list)):  # only containers: small values are cheap and may be interned
        if len(_KEYS) >= MAX_JUDGED:
            _KEYS.clear()
        _KEYS[id(schema)] = (schema, key)
    return key


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


@dataclass(frozen=True)
class Judgement:
    """The outcome of validating one instance: its first error (errors sorted by path), or a failure of the
    validator itself (e.g. an unresolvable ``$ref``), or neither (valid)."""

    where: str | None = None  # "/"-joined absolute path of the first error, "(root)" at the top
    message: str | None = None
    failure: str | None = None  # str() of the exception the validator raised

    @property
    def valid(self) -> bool:
        return self.message is None and self.failure is None


def _judge(schema: Any, instance: Any, format_checker: FormatChecker | None) -> Judgement:
    try:
        errors = list(validator(schema, format_checker).iter_errors(instance))
    except Exception as exc:  # noqa: BLE001 - e.g. an unresolvable $ref: the schema cannot be applied
        return Judgement(failure=str(exc))
    err = next(iter(sorted(errors, key=lambda e: list(e.path))), None)
    if err is None:
        return Judgement()
    return Judgement(where="/".join(str(p) for p in err.absolute_path) or "(root)", message=err.message)


def first_error(schema: Any, instance: Any, text: str | None = None,
                format_checker: FormatChecker | None = None) -> Judgement:
    """Validate ``instance`` against a schema that passed :func:`schema_problem`.

    ``text``: the JSON text ``instance`` was parsed from; when given, the outcome is memoised by (schema, format
    checker, text), since the same text always parses to the same instance. Without it nothing is cached (an
    instance that did not come from text, e.g. an object in a stored reply body).
    """
    if text is None:
        return _judge(schema, instance, format_checker)
    k = (_key(schema), id(format_checker), text)
    hit = _JUDGED.get(k)
    if hit is None:
        if len(_JUDGED) >= MAX_JUDGED:
            _JUDGED.clear()
        hit = _JUDGED[k] = _judge(schema, instance, format_checker)
    return hit
