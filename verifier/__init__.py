"""verifier: tells whether an LLM endpoint serves the model it claims.

The public surface for a library user (what the ``verifier`` command line itself is built from):

* describe endpoints: :class:`EndpointConfig`, :func:`from_flags`, :func:`load_config` -> :class:`EndpointSet`;
* run suites against them: :class:`RunSettings` -> :func:`execute_run` -> :class:`RunOutcome` (raises
  :class:`InputError` for bad input, :class:`RunFailed` when the run could not complete), and
  :func:`merge_runs` for the folders of a sharded run;
* read what a run measured: :class:`RunSummary` (``summary.json``), its :class:`EndpointSuiteResult` per suite
  and endpoint, every figure an :class:`Interval` with its denominator, and one :class:`Verdict` per candidate;
  :class:`ExchangeRecord` is one line of ``records.jsonl``.

Indexing into history and drawing the report are the command line's job (``verifier.cli.compose``).

Names are imported when first used (PEP 562), not with the package: every ``import verifier.<module>`` runs this
file first, and importing the whole surface costs about 0.8 s, which ``verifier run`` spends on its own path anyway
but which would delay what its entry point starts first (the built-in engines' interpreter, issue #43).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verifier.http.endpoints import EndpointSet, from_flags, load_config
    from verifier.records import EndpointConfig, ExchangeRecord, Interval
    from verifier.run.errors import InputError, RunFailed
    from verifier.run.merge import MergeSettings, merge_runs
    from verifier.run.runner import RunOutcome, RunSettings, execute_run
    from verifier.run.summary import EndpointSuiteResult, RunSummary, Verdict

#: public name -> the module that defines it
_HOMES = {
    "EndpointSet": "verifier.http.endpoints", "from_flags": "verifier.http.endpoints",
    "load_config": "verifier.http.endpoints",
    "EndpointConfig": "verifier.records", "ExchangeRecord": "verifier.records", "Interval": "verifier.records",
    "InputError": "verifier.run.errors", "RunFailed": "verifier.run.errors",
    "MergeSettings": "verifier.run.merge", "merge_runs": "verifier.run.merge",
    "RunOutcome": "verifier.run.runner", "RunSettings": "verifier.run.runner", "execute_run": "verifier.run.runner",
    "EndpointSuiteResult": "verifier.run.summary", "RunSummary": "verifier.run.summary",
    "Verdict": "verifier.run.summary",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'verifier' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value          # once: later lookups are plain attribute reads
    return value


__all__ = [
    "EndpointConfig",
    "EndpointSet",
    "EndpointSuiteResult",
    "ExchangeRecord",
    "InputError",
    "Interval",
    "MergeSettings",
    "RunFailed",
    "RunOutcome",
    "RunSettings",
    "RunSummary",
    "Verdict",
    "execute_run",
    "from_flags",
    "load_config",
    "merge_runs",
]
