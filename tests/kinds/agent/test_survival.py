"""Errors compound as the maths says: with a per-step invalid-call rate p, the first invalid step is geometric.

A scripted agent (the oracle behind the loopback server) makes each step invalid with probability p. With
``max_invalid_streak = 1`` a trial stops at its first invalid call, so each trial is one observation of the
survival time, censored at task end when no error happened. The Kaplan-Meier curve the scorer builds from the
recorded steps must contain S(t) = (1 - p)^t in its 95% band, and an off-by-one in step counting (S = (1-p)^(t+1)
or (1-p)^(t-1)) must not fit. Draws are seeded, so the test is deterministic.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from scipy import stats as sst

from tests.kinds.agent.conftest import open_context
from verifier.kinds.agent.kind import AGENT_KIND
from verifier.kinds.agent.scoring import collect_trials
from verifier.stats.survival import kaplan_meier
from verifier.testing import ScriptedServer
from verifier.testing.scripted_agent import OraclePolicy

P = 0.2
HORIZON = 10


@pytest.mark.slow
async def test_first_invalid_step_is_geometric(tmp_path: Path) -> None:
    seeds = list(range(50))
    path = tmp_path / "geo.jsonl"
    path.write_text("".join(json.dumps({"env": "notes", "horizon": HORIZON, "seed": s}) + "\n" for s in seeds))
    options = {"max_invalid_streak": 1, "trials": 4}  # 50 scenarios x 4 trials = 200 independent trials
    suite = AGENT_KIND.load(str(path), options)
    with ScriptedServer(OraclePolicy(suite.cases, error_rate=P, seed=11), models=["m0"]) as srv:
        async with AsyncExitStack() as stack:
            ctx = await open_context(stack, tmp_path / "run", srv.base_url, ["m0"], options)
            await AGENT_KIND.run(suite, ctx)
            records = ctx.store.read(kind="agent_step")

    trials = [t for ts in collect_trials(records, suite.manifest.name)[0].values() for t in ts]
    assert len(trials) == 200 and all(t.finished for t in trials)
    obs = [t.first_invalid() for t in trials]
    # every trial ends at its first invalid call, or solves the task with none
    for t, (_, event) in zip(trials, obs):
        assert t.stop_reason == ("invalid_streak" if event else "final_answer")
    curve = kaplan_meier([x for x, _ in obs], [e for _, e in obs])
    assert curve.events > 120  # P(error within 10 steps) = 1 - 0.8^10 = 0.89
    for t in (1, 2, 3, 5, 8):
        lo, hi = curve.band_at(t)
        assert lo <= (1 - P) ** t <= hi, (t, lo, curve.at(t), hi, (1 - P) ** t)
    # a step-count error by one would show: (1-p)^(t+1) and (1-p)^(t-1) fall outside the band at t = 3
    lo, hi = curve.band_at(3)
    assert not lo <= (1 - P) ** 4 <= hi and not lo <= (1 - P) ** 2 <= hi
    # and the per-step hazard (events / steps at risk) has p inside its exact binomial interval
    at_risk = sum(x for x, _ in obs)
    ci = sst.binomtest(curve.events, at_risk).proportion_ci(0.95)
    assert ci.low <= P <= ci.high

    (res,) = AGENT_KIND.score(suite, records, "m0", ["m0"])
    assert res.metrics["pass^4"].n == 50
    surv = next(s for s in res.series if s.name == "survival_first_invalid")
    assert surv.x[0] == 0 and surv.y[0] == 1.0 and all(a >= b for a, b in zip(surv.y, surv.y[1:]))
