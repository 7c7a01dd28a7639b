"""Long-horizon agent suites: deterministic stateful environments, scenarios and built-in suites.

Import surface for the runner, the tests and the model engineer's data generator::

    from suites.agent import ENVIRONMENTS, Scenario, builtin_suite, make_env
    env = make_env("tickets", seed=0, horizon=25)
    env.tools(); env.call("fetch_next", "{}"); env.next_action(); env.check()
"""

from suites.agent.base import Action, Environment, ToolEvent, ToolOutcome
from suites.agent.scenarios import (
    ENVIRONMENTS,
    HORIZONS,
    SYSTEM_PROMPT,
    Scenario,
    builtin_suite,
    content_hash,
    family,
    load_scenario_file,
    make_env,
    scenario,
)

__all__ = [
    "Action",
    "Environment",
    "ToolEvent",
    "ToolOutcome",
    "ENVIRONMENTS",
    "HORIZONS",
    "SYSTEM_PROMPT",
    "Scenario",
    "builtin_suite",
    "content_hash",
    "family",
    "load_scenario_file",
    "make_env",
    "scenario",
]
