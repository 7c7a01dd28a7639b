"""Scenarios and the built-in agent suites.

A scenario is an environment family + seed + horizon (the exact minimum number of tool calls a solution needs)
+ a plain-language goal + a step budget; the success check is the environment's ``check()`` on the final state.
Families are parametrised by horizon on the ladder 10, 25, 50, 100, 200, 500. Two built-in suites:

* ``agent-smoke``: every environment at horizon 10 with seeds 0, 1 and 2 (12 scenarios: a quick end-to-end check).
  Why three seeds: task success is compared across *scenarios* with an exact sign test, and its two-sided p-value
  is at best ``2 * 0.5 ** m`` for ``m`` scenarios that one endpoint solves and the other fails. With the 4
  scenarios of one seed even a candidate that fails every task got p = 0.125; a verdict judging about six
  headline tests with Holm needs p < 0.05 / 6, so at least 8 such scenarios, and the verdict calls a
  comparison on fewer than 10 scenarios "not testable". 12 leaves room for a task the reference itself fails.
  Seeds 0-4 are the model card's held-out agent seeds (training uses seeds from 100,000, validation 5-9).
* ``agent-long``: every environment at every horizon of the ladder (seed 0).

A suite's content hash covers the scenario specs *and* a digest of each scenario's initial state, so a change to
an environment generator changes the hash even when names and seeds stay the same.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from suites.agent.base import Environment
from suites.agent.files import FileSystemEnv
from suites.agent.ledger import LedgerEnv
from suites.agent.notes import NotesEnv
from suites.agent.tickets import TicketQueueEnv

ENVIRONMENTS: dict[str, type[Environment]] = {
    cls.name: cls for cls in (FileSystemEnv, TicketQueueEnv, LedgerEnv, NotesEnv)
}
HORIZONS: tuple[int, ...] = (10, 25, 50, 100, 200, 500)
SMOKE_HORIZONS: tuple[int, ...] = (10,)
SMOKE_SEEDS: tuple[int, ...] = (0, 1, 2)
SUITE_VERSION = "1"

SYSTEM_PROMPT = (
    "You are an agent that completes tasks by calling tools. Call one tool at a time and read each result. "
    "When the task is complete, reply with a short final message and no tool call."
)


class Scenario(BaseModel):
    """One agent task. ``goal`` is derived from the environment, kept here so records and reports can show it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    env: str
    seed: int
    horizon: int
    goal: str
    step_budget: int
    system: str = SYSTEM_PROMPT

    def make_env(self) -> Environment:
        """A fresh environment in this scenario's initial state."""
        return make_env(self.env, self.seed, self.horizon)


def make_env(env: str, seed: int, horizon: int) -> Environment:
    try:
        cls = ENVIRONMENTS[env]
    except KeyError:
        raise ValueError(f"unknown agent environment {env!r}; known: {', '.join(ENVIRONMENTS)}") from None
    if horizon < cls.min_horizon:
        raise ValueError(f"environment {env!r} needs horizon >= {cls.min_horizon}, got {horizon}")
    return cls(seed, horizon)


def default_budget(horizon: int) -> int:
    """Model requests allowed: 1.5x the minimum plus slack for a final answer and a few recoveries."""
    return math.ceil(1.5 * horizon) + 5


def scenario(env: str, horizon: int, seed: int = 0, step_budget: int | None = None) -> Scenario:
    instance = make_env(env, seed, horizon)
    return Scenario(
        id=f"{env}-h{horizon}-s{seed}",
        env=env,
        seed=seed,
        horizon=horizon,
        goal=instance.goal(),
        step_budget=step_budget if step_budget is not None else default_budget(horizon),
    )


def family(env: str, horizons: tuple[int, ...] = HORIZONS, seed: int = 0) -> list[Scenario]:
    """One environment across a horizon ladder."""
    return [scenario(env, h, seed) for h in horizons]


def builtin_suite(name: str) -> list[Scenario]:
    """Scenarios of a built-in suite, in a stable order (environment, then horizon, then seed)."""
    if name == "agent-smoke":
        horizons, seeds = SMOKE_HORIZONS, SMOKE_SEEDS
    elif name == "agent-long":
        horizons, seeds = HORIZONS, (0,)
    else:
        raise ValueError(f"unknown built-in agent suite {name!r} (known: agent-smoke, agent-long)")
    return [scenario(env, h, seed) for env in ENVIRONMENTS for h in horizons for seed in seeds]


def load_scenario_file(path: Path) -> list[Scenario]:
    """A JSONL file of scenario specs: ``{"env", "horizon", "seed"?, "step_budget"?}`` per line.

    The goal is always regenerated from the environment (so a file cannot drift from the world it names).
    Bad lines raise ``ValueError`` naming file and line.
    """
    out: list[Scenario] = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            spec = json.loads(line)
            if not isinstance(spec, dict):
                raise ValueError("expected a JSON object")
            unknown = set(spec) - {"env", "horizon", "seed", "step_budget", "id"}
            if unknown:
                raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
            s = scenario(str(spec["env"]), int(spec["horizon"]), int(spec.get("seed", 0)), spec.get("step_budget"))
            if "id" in spec:
                s = s.model_copy(update={"id": str(spec["id"])})
        except KeyError as exc:
            raise ValueError(f"{path}:{lineno}: missing field {exc.args[0]!r}") from None
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from None
        out.append(s)
    ids = [s.id for s in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate scenario ids")
    return out


def content_hash(scenarios: list[Scenario]) -> str:
    """sha256 over canonical scenario specs plus each initial state's digest."""
    h = hashlib.sha256()
    for s in scenarios:
        h.update(json.dumps(s.model_dump(), sort_keys=True, separators=(",", ":")).encode())
        h.update(s.make_env().state_digest().encode())
    return h.hexdigest()
