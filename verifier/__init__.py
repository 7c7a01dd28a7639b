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
"""

from verifier.http.endpoints import EndpointSet, from_flags, load_config
from verifier.records import EndpointConfig, ExchangeRecord, Interval
from verifier.run.errors import InputError, RunFailed
from verifier.run.merge import MergeSettings, merge_runs
from verifier.run.runner import RunOutcome, RunSettings, execute_run
from verifier.run.summary import EndpointSuiteResult, RunSummary, Verdict

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
