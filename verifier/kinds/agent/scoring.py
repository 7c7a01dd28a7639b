"""Scoring of agent-suite records: task success, pass^k, step validity, survival, divergence.

Input is the ``agent_step`` records the agent runner wrote (one per model request; ``repeat`` = trial, ``step`` =
index, ``extra`` = validity, actions, stop reason). They are first folded into :class:`Trial` objects (one per
endpoint x scenario x trial, using the finished attempt when a trial was restarted), then every metric is a pure
function of trials. Metric names follow docs/CONTRACTS.md:

* ``task_success``: share of tasks whose final state passes the scenario's check, as the mean over scenarios of
  each scenario's solved share (Wilson interval on n = scenarios: trials of one scenario are not independent;
  see :mod:`verifier.kinds.agent.task_success`).
* ``pass^k``: tau-bench's unbiased estimator, per scenario ``C(c, k) / C(n, k)`` with ``c`` successes in ``n``
  trials, averaged over scenarios, with the same interval (so ``pass^1`` *is* ``task_success``, interval and all).
* ``step_validity``: share of tool-calling steps whose calls were all valid (JSON object, known tool, schema ok);
  steps of one scenario are correlated, so the interval resamples whole scenarios.
* ``first_invalid_step_median``: Kaplan-Meier median of the 1-based index of the first step with an invalid call,
  censored at the trial's last tool-calling step when none was invalid (log-log band for its interval).
* ``trajectory_divergence_step_median``: for candidates, the Kaplan-Meier median of the first step whose tool calls
  (name + canonical arguments) differ from the reference's trajectory on the same scenario and trial; censored at
  the trajectory's end when the two never part.

Comparisons with the reference pair trials by (scenario, trial). Task success is compared across scenarios with
an exact sign-flip test and Newcombe's paired score interval (:mod:`verifier.kinds.agent.task_success`), which stay
honest with a dozen scenarios and outcomes that all agree; step validity uses standard errors clustered by scenario
(``stats.cluster_robust_diff``), because steps of one scenario are not independent.

Provider faults are not model failures: a trial that ended because a request failed at the endpoint after all
retries (``stop_reason == "endpoint_error"``) says nothing about the model, so it is reported as an endpoint error
(``endpoint_error_trials`` and the ``endpoint_error_rate`` metric, n = finished trials) and kept out of task
success, pass^k, step validity, survival and divergence; comparisons use only trials both endpoints completed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from verifier.kinds.agent.task_success import UNIT, compare_task_success, per_scenario, success_rate
from verifier.records import ExchangeRecord, Interval
from verifier.run.summary import Comparison, Disagreement, EndpointSuiteResult, Series
from verifier.stats import intervals as stats
from verifier.stats.paired_units import unit_mean_rate
from verifier.stats.survival import Survival, kaplan_meier, km_median

#: step-index bins for the validity-by-step chart when trajectories are long (bin = [edge_i, edge_{i+1}))
LOG_BIN_EDGES = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
MAX_DISAGREEMENTS = 25
#: the runner's stop reason for a trial ended by a request that failed at the endpoint after retries
ENDPOINT_ERROR_STOP = "endpoint_error"


@dataclass
class Step:
    """One model request of a trial, reduced to what scoring needs."""

    index: int
    calls: int
    invalid_calls: int
    actions: list[str]
    ok: bool  # the request itself succeeded (HTTP 2xx, no client error)
    error_kinds: list[str] = field(default_factory=list)
    dropped_turns: int = 0  # old turns the runner dropped before this request, to fit the endpoint's context
    context_resends: int = 0  # re-sends of this request after the endpoint refused it as too long

    @property
    def valid(self) -> bool | None:
        """All calls of this step valid; None for a step without tool calls (a final answer or a failed request)."""
        return None if self.calls == 0 else self.invalid_calls == 0


@dataclass
class Trial:
    endpoint: str
    scenario: str
    trial: int
    attempt: int
    horizon: int | None
    steps: list[Step]
    stop_reason: str | None
    success: bool

    @property
    def finished(self) -> bool:
        return self.stop_reason is not None

    @property
    def endpoint_failed(self) -> bool:
        """Ended by a request that failed at the provider after all retries: not a verdict on the model."""
        return self.stop_reason == ENDPOINT_ERROR_STOP

    def tool_steps(self) -> list[Step]:
        return [s for s in self.steps if s.calls > 0]

    def first_invalid(self) -> tuple[int, bool]:
        """(time, event): 1-based index among tool-calling steps of the first invalid one, or (count, False)."""
        tool_steps = self.tool_steps()
        for i, s in enumerate(tool_steps, 1):
            if s.invalid_calls:
                return i, True
        return len(tool_steps), False

    def signature(self) -> list[str]:
        """The trajectory as comparable per-step strings (actions, or a marker for a final answer / failure)."""
        out = []
        for s in self.steps:
            if s.calls:
                out.append(" | ".join(s.actions))
            else:
                out.append("<final answer>" if s.ok else "<request failed>")
        return out


def collect_trials(
    records: Iterable[ExchangeRecord], suite: str
) -> tuple[dict[str, list[Trial]], dict[str, int]]:
    """Fold step records into trials per endpoint. Returns ``(trials_by_endpoint, interrupted_attempts_by_endpoint)``.

    A trial restarted after an interruption has several attempts (``extra.attempt``); the latest *finished* one
    counts, and unfinished attempts are only counted. A trial with no finished attempt is kept as unfinished so
    it can be reported, but metrics use finished trials only.
    """
    grouped: dict[tuple[str, str, int, int], list[ExchangeRecord]] = defaultdict(list)
    for r in records:
        if r.kind != "agent_step" or r.suite != suite:
            continue
        grouped[(r.endpoint, r.case_id, r.repeat, int(r.extra.get("attempt", 0)))].append(r)
    best: dict[tuple[str, str, int], Trial] = {}
    interrupted: dict[str, int] = defaultdict(int)
    for (endpoint, case_id, trial, attempt), recs in sorted(grouped.items()):
        recs.sort(key=lambda r: (r.step if r.step is not None else -1))
        stop = next((r.extra.get("stop_reason") for r in reversed(recs) if r.extra.get("stop_reason")), None)
        success = bool(next((r.extra.get("success") for r in reversed(recs) if "success" in r.extra), False))
        steps = [
            Step(
                index=r.step if r.step is not None else i,
                calls=int(r.extra.get("n_calls", 0)),
                invalid_calls=int(r.extra.get("n_invalid", 0)),
                actions=list(r.extra.get("actions", [])),
                ok=r.ok,
                error_kinds=[c.get("error_kind") for c in r.extra.get("calls", []) if c.get("error_kind")],
                dropped_turns=int(r.extra.get("trimmed_turns", 0)),
                context_resends=int(r.extra.get("context_retries", 0)),
            )
            for i, r in enumerate(recs)
        ]
        t = Trial(endpoint, case_id, trial, attempt, recs[0].extra.get("horizon"), steps, stop, success
                  and stop is not None)
        key = (endpoint, case_id, trial)
        prev = best.get(key)
        if stop is None:
            interrupted[endpoint] += 1
        if prev is None or (t.finished and (not prev.finished or t.attempt > prev.attempt)):
            best[key] = t
    by_endpoint: dict[str, list[Trial]] = defaultdict(list)
    for (endpoint, _, _), t in sorted(best.items()):
        by_endpoint[endpoint].append(t)
    return dict(by_endpoint), dict(interrupted)


# ---- metric building blocks (pure) -----------------------------------------------------------------------

def pass_hat_k(successes: int, trials: int, k: int) -> float:
    """tau-bench's pass^k for one scenario: probability that k trials drawn without replacement all succeed."""
    if k > trials:
        raise ValueError(f"pass^{k} needs at least {k} trials, got {trials}")
    return math.comb(successes, k) / math.comb(trials, k)


def pass_k_intervals(by_scenario: dict[str, list[bool]]) -> dict[int, Interval]:
    """pass^k for k = 1..K (K = fewest trials any scenario has), averaged over scenarios.

    The interval is task success's (Wilson on n = scenarios over per-scenario values in [0, 1]), so pass^1 and task
    success, the same quantity, never disagree; a bootstrap over four scenarios all at 1 gave [100 %, 100 %].
    """
    if not by_scenario:
        return {}
    k_max = min(len(v) for v in by_scenario.values())
    return {
        k: unit_mean_rate([pass_hat_k(sum(v), len(v), k) for v in by_scenario.values()])
        for k in range(1, k_max + 1)
    }


def validity_by_step(trials: Sequence[Trial]) -> Series:
    """Step validity as a function of step index (how errors compound), Wilson band per bin.

    Short trajectories get one bin per step; longer ones log-spaced bins so late steps still have a denominator.
    """
    pairs = [(s.index, bool(s.valid)) for t in trials for s in t.steps if s.valid is not None]
    if not pairs:
        return Series(name="step_validity_by_step", x=[], y=[], x_label="step index", y_label="valid step share")
    top = max(i for i, _ in pairs)
    edges = list(range(0, top + 2)) if top < 20 else [e for e in LOG_BIN_EDGES if e <= top] + [top + 1]
    xs, ys, lows, highs = [], [], [], []
    for lo_e, hi_e in zip(edges, edges[1:]):
        flags = [v for i, v in pairs if lo_e <= i < hi_e]
        if not flags:
            continue
        bounds = _bounds(stats.rate(flags))
        if bounds is None:
            continue
        xs.append(float(lo_e))
        ys.append(bounds[0])
        lows.append(bounds[1])
        highs.append(bounds[2])
    return Series(
        name="step_validity_by_step", x=xs, y=ys, low=lows, high=highs,
        x_label="step index (bin start)", y_label="share of steps with all tool calls valid",
    )


def survival_series(name: str, curve: Survival | None, x_label: str, y_label: str) -> Series:
    if curve is None:
        return Series(name=name, x=[], y=[], x_label=x_label, y_label=y_label)
    return Series(
        name=name, x=[0.0] + [float(t) for t in curve.times], y=[1.0] + curve.surv,
        low=[1.0] + curve.low, high=[1.0] + curve.high, x_label=x_label, y_label=y_label,
    )


def divergence(ref: Trial, cand: Trial) -> tuple[int, bool, str | None, str | None]:
    """(time, event, reference step, candidate step): 1-based first step where the trajectories differ."""
    a, b = ref.signature(), cand.signature()
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return i + 1, True, a[i], b[i]
    if len(a) != len(b):
        i = min(len(a), len(b))
        return i + 1, True, (a[i] if i < len(a) else "<trajectory ended>"), (b[i]
                                                                             if i < len(b) else "<trajectory ended>")
    return len(a), False, None, None


# ---- per-endpoint result ---------------------------------------------------------------------------------

def _counts(trials: Sequence[Trial], all_trials: Sequence[Trial], interrupted: int) -> dict[str, int]:
    c: dict[str, int] = defaultdict(int)
    c["trials"] = len(trials)
    c["endpoint_error_trials"] = sum(1 for t in trials if t.endpoint_failed)
    c["scored_trials"] = len(trials) - c["endpoint_error_trials"]
    c["unfinished_trials"] = sum(1 for t in all_trials if not t.finished)
    c["interrupted_attempts"] = interrupted
    for t in trials:
        c[f"stop:{t.stop_reason}"] += 1
        c["successes"] += int(t.success)
        c["trimmed_trials"] += int(any(s.dropped_turns for s in t.steps))
        for s in t.steps:
            c["steps"] += 1
            c["tool_calls"] += s.calls
            c["invalid_calls"] += s.invalid_calls
            c["failed_requests"] += int(not s.ok)
            c["dropped_turns"] += s.dropped_turns
            c["context_resends"] += s.context_resends
            for kind in s.error_kinds:
                c[f"error:{kind}"] += 1
    return dict(c)


def _success_by_horizon(trials: Sequence[Trial]) -> Series:
    """Task success per horizon, on scenarios as task success itself is (so the chart and the headline agree)."""
    by_h: dict[int, list[Trial]] = defaultdict(list)
    for t in trials:
        if t.horizon is not None:
            by_h[int(t.horizon)].append(t)
    points = [(float(h), b) for h in sorted(by_h) if (b := _bounds(success_rate(per_scenario(by_h[h])))) is not None]
    return Series(
        name="task_success_by_horizon", x=[h for h, _ in points], y=[b[0] for _, b in points],
        low=[b[1] for _, b in points], high=[b[2] for _, b in points],
        x_label="horizon (minimum tool calls)", y_label="task success",
    )


def _trial_validity(t: Trial) -> float | None:
    flags = [s.valid for s in t.steps if s.valid is not None]
    return None if not flags else sum(flags) / len(flags)


def score_endpoint(
    endpoint: str,
    suite: str,
    trials: Sequence[Trial],
    *,
    is_reference: bool,
    reference_trials: Sequence[Trial] | None,
    interrupted: int = 0,
) -> EndpointSuiteResult:
    """All agent metrics, series, comparisons and disagreements for one endpoint."""
    finished = [t for t in trials if t.finished]
    done = [t for t in finished if not t.endpoint_failed]  # what the model did: provider faults left out
    result = EndpointSuiteResult(endpoint=endpoint, suite=suite, kind="agent", is_reference=is_reference)
    result.counts = _counts(finished, trials, interrupted)
    by_scenario = per_scenario(done)
    result.metrics["task_success"] = success_rate(by_scenario)
    result.metrics["endpoint_error_rate"] = stats.rate([t.endpoint_failed for t in finished])
    for k, iv in pass_k_intervals(by_scenario).items():
        result.metrics[f"pass^{k}"] = iv

    step_flags = [(t.scenario, float(bool(s.valid))) for t in done for s in t.steps if s.valid is not None]
    if step_flags:
        result.metrics["step_validity"] = stats.bootstrap_mean(
            [v for _, v in step_flags], clusters=[c for c, _ in step_flags]
        )
    else:
        result.metrics["step_validity"] = Interval(value=None, n=0, method="cluster_bootstrap")

    surv_data = [t.first_invalid() for t in done if t.tool_steps()]
    curve = kaplan_meier([x for x, _ in surv_data], [e for _, e in surv_data])
    result.metrics["first_invalid_step_median"] = km_median(curve)

    result.series = [
        _success_by_horizon(done),
        validity_by_step(done),
        survival_series(
            "survival_first_invalid", curve, "tool-calling steps", "P(no invalid call in the first t steps)"
        ),
    ]
    result.extra["scenarios"] = {
        sid: {"successes": sum(v), "trials": len(v)} for sid, v in sorted(by_scenario.items())
    }
    result.notes.append(
        f"task success and pass^k: per-scenario shares averaged over {len(by_scenario)} scenarios "
        f"({len(done)} trials), Wilson intervals on n = scenarios; pass^k is tau-bench's unbiased estimator "
        "C(c,k)/C(n,k)."
    )
    if result.counts.get("endpoint_error_trials"):
        result.notes.append(
            f"{result.counts['endpoint_error_trials']} of {result.counts['trials']} trial(s) ended on a request that "
            "failed at the endpoint after all retries: reported as endpoint errors (endpoint_error_rate), not as "
            f"failed tasks; task success, pass^k, step validity and divergence use the other "
            f"{result.counts['scored_trials']}."
        )
    if result.counts.get("trimmed_trials"):
        # why: a trimmed agent no longer sees its early turns, so two endpoints with different context lengths
        # do not face the same task; a reader comparing them must know
        result.notes.append(
            f"{result.counts['trimmed_trials']} of {result.counts['trials']} trial(s) had their history trimmed to "
            f"fit the endpoint's context ({result.counts['dropped_turns']} old turns dropped, "
            f"{result.counts['context_resends']} request(s) re-sent after a context-length error); the system "
            "prompt, the goal and the latest turns were always kept."
        )
    if result.counts.get("unfinished_trials"):
        result.notes.append(f"{result.counts['unfinished_trials']} trial(s) never finished and are not scored.")

    if not is_reference and reference_trials is not None:
        ref_done = [t for t in reference_trials if t.finished and not t.endpoint_failed]
        failed_ref = frozenset((t.scenario, t.trial) for t in reference_trials if t.finished and t.endpoint_failed)
        _compare(result, done, ref_done, failed_ref)
        ref_failed = sum(1 for t in reference_trials if t.finished and t.endpoint_failed)
        if result.counts.get("endpoint_error_trials") or ref_failed:
            result.notes.append(
                "comparisons with the reference use only trials both endpoints completed without an endpoint error "
                f"(reference endpoint errors: {ref_failed}, "
                f"this endpoint's: {result.counts.get('endpoint_error_trials', 0)})."
            )
    return result


def _cluster_p(iv: Interval, n_clusters: int) -> float | None:
    """Two-sided p-value of the cluster-robust t test behind ``iv`` (t on G-1 df, se recovered from the CI)."""
    if iv.value is None or iv.low is None or iv.high is None or n_clusters < 2:
        return None
    from scipy.stats import t as student_t  # imported when first needed: scipy.stats costs ~0.5 s

    t_crit = float(student_t.ppf(0.975, df=n_clusters - 1))
    se = (iv.high - iv.low) / (2 * t_crit)
    if se <= 0:
        return 1.0 if iv.value == 0 else None  # no spread: a p-value would be a fiction
    from scipy.stats import t as student_t

    return float(2 * student_t.sf(abs(iv.value) / se, df=n_clusters - 1))


def _bounds(iv: Interval) -> tuple[float, float, float] | None:
    """(value, low, high) of a rate for a chart, or None when it has no estimate (nothing was measured)."""
    if iv.value is None or iv.low is None or iv.high is None:
        return None
    return iv.value, iv.low, iv.high


def _compare(result: EndpointSuiteResult, cand: Sequence[Trial], ref: Sequence[Trial],
             failed_ref: frozenset[tuple[str, int]] = frozenset()) -> None:
    """Divergence from the reference trajectory and clustered differences on paired trials.
    ``failed_ref``: (scenario, trial) of reference trials that ended on an endpoint error."""
    ref_by = {(t.scenario, t.trial): t for t in ref}
    ref_first: dict[str, Trial] = {}
    for t in sorted(ref, key=lambda t: t.trial):
        ref_first.setdefault(t.scenario, t)
    times, events, pairs = [], [], []
    for t in cand:
        # the paired reference trial; another trial of the scenario only when this one does not exist at all
        # (never when it ended on an endpoint error: that path says nothing about the model)
        r = ref_by.get((t.scenario, t.trial)) or (ref_first.get(t.scenario) if (t.scenario, t.trial) not in failed_ref
                                                   else None)
        if r is None:
            continue
        time, event, ref_step, cand_step = divergence(r, t)
        times.append(time)
        events.append(event)
        if event and len(result.disagreements) < MAX_DISAGREEMENTS:
            result.disagreements.append(
                Disagreement(
                    case_id=t.scenario, kind="trajectory", reference=ref_step, candidate=cand_step,
                    detail=f"trial {t.trial}: first departs from the reference at step {time}",
                )
            )
        if (t.scenario, t.trial) in ref_by:
            pairs.append((r, t))
    div_curve = kaplan_meier(times, events)
    result.metrics["trajectory_divergence_step_median"] = km_median(div_curve)
    result.series.append(
        survival_series("survival_same_as_reference", div_curve, "step", "P(still on the reference trajectory)")
    )
    if not pairs:
        result.notes.append("no trial pairs with the reference: no comparisons.")
        return
    task = compare_task_success(pairs)
    if task is not None:
        result.comparisons["task_success"] = task
    vpairs = [(rv, cv, r.scenario) for r, c in pairs
              if (rv := _trial_validity(r)) is not None and (cv := _trial_validity(c)) is not None]
    if vpairs:
        vclusters = [s for _, _, s in vpairs]
        vdiff = stats.cluster_robust_diff([a for a, _, _ in vpairs], [b for _, b, _ in vpairs], vclusters)
        result.comparisons["step_validity"] = Comparison(
            metric="step_validity", difference=vdiff, p_value=_cluster_p(vdiff, len(set(vclusters))),
            test="cluster_robust", unit=UNIT, independent_units=len(set(vclusters)),
        )


def score_records(
    records: Iterable[ExchangeRecord], suite: str, reference: str, endpoints: Sequence[str]
) -> list[EndpointSuiteResult]:
    """Entry point used by the agent SuiteKind: one result per endpoint, reference first."""
    records = [r for r in records if r.kind == "agent_step" and r.suite == suite]
    by_endpoint, interrupted = collect_trials(records, suite)
    ref_trials = by_endpoint.get(reference, [])
    ordered = [reference] + [e for e in endpoints if e != reference]
    out = []
    for name in ordered:
        trials = by_endpoint.get(name, [])
        res = score_endpoint(
            name, suite, trials, is_reference=(name == reference),
            reference_trials=ref_trials if name != reference else None, interrupted=interrupted.get(name, 0),
        )
        mine = [r for r in records if r.endpoint == name]  # every attempt's requests: they match records.jsonl
        res.counts["requests"] = len(mine)
        res.counts["request_errors"] = sum(1 for r in mine if not r.ok)
        out.append(res)
    return out
