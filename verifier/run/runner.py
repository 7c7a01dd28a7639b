"""Drive one run: load suites, check inputs, preflight, every suite kind against every endpoint, score, summary.

Suite kinds (toolcall, agent, logprob, cache) plug in through the :class:`SuiteKind` protocol and are found by
``verifier.run.registry``; this module knows nothing about what a kind measures. It owns the order of
events and the guarantees around them:

* nothing is sent before every input is checked (suite files, TOML, key env vars) and every endpoint has
  passed preflight (reachable, key accepted, model served), so mistakes cost seconds, not a half-run;
* every exchange lands in ``records.jsonl`` as it completes, so ``--resume DIR`` continues a killed run from
  the manifest alone: nothing recorded is lost or sent again, and requests that were in flight at the kill
  (sent, not yet recorded) are sent once more (the suites' content hashes must still match);
* one process writes a run folder at a time (:class:`~verifier.run.store.RunFolderLock`, held from the folder's
  creation or the resume until the summary is written), and scoring counts each record key once;
* ``manifest.json`` and ``summary.json`` never contain a secret (only env var names; header values redacted).

The runner never indexes history or renders a report: ``verifier.cli.compose`` does that after it returns, so
nothing here imports ``reports`` or the history database.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import importlib.metadata
import logging
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifier.http.client import EndpointClient, EndpointError
from verifier.http.endpoints import (
    BuiltinServers,
    BuiltinStartError,
    EndpointConfigError,
    EndpointSet,
    check_keys,
    default_endpoints,
)
from verifier.http.spend import EndpointLedger, build_ledgers, usd
from verifier.kinds.logprob.fingerprint import read_profile_file
from verifier.records import ExchangeRecord
from verifier.run import context_probe, format_probe
from verifier.run.claims import check_claims
from verifier.run.cost import PLAN_NAME, budget_stop, run_cost, with_plan
from verifier.run.early_scoring import EarlyScorer, score_suite
from verifier.run.errors import InputError, RunFailed
from verifier.run.loading import LoadedSuites, load_suites, suites_to_run
from verifier.run.manifest_endpoints import endpoints_from_manifest, manifest_endpoints
from verifier.run.progress import Progress
from verifier.run.protocol import RunContext, SuiteKind, suite_problems
from verifier.run.sequential import SequentialPolicy
from verifier.run.sequential_run import SequentialSettings, draw_order, run_sequential, stopped_block, supports
from verifier.run.shard import Shard, ShardSpecError, shard_suite
from verifier.run.store import (
    LOCK_NAME,
    ManifestSuite,
    RecordStore,
    RunFolderBusy,
    RunFolderLock,
    RunManifest,
    StoreError,
    display_json,
    new_run_id,
)
from verifier.run.summary import EndpointSuiteResult, InputProblem, RunSummary, SequentialResult, StopInfo
from verifier.run.timings import RunClock
from verifier.run.verdict import compute_verdicts

log = logging.getLogger(__name__)


@dataclass
class RunSettings:
    """Everything ``verifier run`` was asked to do (the CLI builds this; tests build it directly)."""

    suites: list[str] = field(default_factory=list)
    endpoints: EndpointSet | None = None
    out: Path | None = None
    resume: Path | None = None
    repeats: int = 1
    seed: int = 0
    limit: int | None = None
    strict: bool = False
    stream: bool | None = None
    options: dict[str, Any] = field(default_factory=dict)  # kind-specific: horizon, trials, ...
    display_progress: bool | None = None
    backoff_base: float = 0.5
    shard: str | None = None  # "I/N": run only this shard's cases of every suite (verifier.run.shard)
    #: what the caller does with the finished folder (``verifier.cli.compose``: history index on/off, database),
    #: recorded in the manifest so that ``--resume`` does the same; the runner only keeps it, never acts on it
    publish: dict[str, Any] = field(default_factory=dict)
    budget: float | None = None  # --budget: USD the whole run may spend (priced endpoints only)
    probe_context: bool = False  # one request near each stated context_length (costs tokens; verifier.run.claims)
    #: ``--sequential [--look-every N]``: anytime-valid early stopping per candidate (verifier.run.sequential_run)
    sequential: bool = False
    look_every: int = 50


@dataclass
class RunOutcome:
    run_dir: Path
    summary: RunSummary
    problems: list[str] = field(default_factory=list)  # run-level failures (exit 3 when non-empty)
    warnings: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------------------------------------
# the data path, top-down: plan (every input checked, nothing sent) -> preflight -> each suite -> score
# ----------------------------------------------------------------------------------------------------------

def execute_run(settings: RunSettings) -> RunOutcome:
    """Run everything ``settings`` asks for; raises InputError (exit 2) or RunFailed (exit 3) with clear lines.

    The data path, top-down: check and load every input, then (engines up, clients open) preflight, send every
    suite, score and write the summary. The run folder's writer lock is held from the moment the folder is
    chosen until this returns.
    """
    with contextlib.ExitStack() as held:
        clock = RunClock()
        plan = plan_run(settings, held)
        try:
            with clock.phase("engines"):
                held.enter_context(BuiltinServers(plan.endpoints))  # stopped before the folder lock is released
            outcome = asyncio.run(_send_and_score(plan, clock))
        except EndpointConfigError as e:
            raise InputError(str(e)) from None
        except BuiltinStartError as e:
            raise RunFailed([str(e)]) from None
        outcome.warnings = plan.warnings + outcome.warnings
        return outcome


@dataclass
class RunPlan:
    """A run with every input checked and the folder locked: nothing has been sent yet."""

    settings: RunSettings
    endpoints: EndpointSet
    loaded: LoadedSuites
    run_dir: Path
    resumed: RunManifest | None  # the manifest of the run being resumed
    problems: list[InputProblem]
    warnings: list[str]
    recorded_settings: dict[str, Any]  # what manifest.json and summary.json say the run was asked
    ledgers: dict[str, EndpointLedger] = field(default_factory=dict)  # priced endpoints: spend and budget caps


def plan_run(s: RunSettings, held: contextlib.ExitStack) -> RunPlan:
    """Every check that needs no network: endpoints, key env vars, suites (and, on resume, their hashes), folder."""
    resumed = _resume_manifest(s, Path(s.resume), held) if s.resume is not None else None
    if resumed is not None:
        endpoints = endpoints_from_manifest(resumed, s.endpoints)
        refs = [ms.ref for ms in resumed.suites]
    else:
        endpoints = s.endpoints if s.endpoints is not None else default_endpoints(stream=s.stream)
        refs = suites_to_run(s.suites, endpoints)
    try:
        check_keys(endpoints)
    except EndpointConfigError as e:
        raise InputError(str(e)) from None
    _fingerprint_option(s, endpoints)
    shard = _shard(s.shard)
    loaded = load_suites(refs, kind_options(s))
    if resumed is not None:
        _check_unchanged(resumed, loaded)
    if shard is not None:  # after the hash check: the manifest keeps describing the whole suite
        loaded = [(ref, kind, shard_suite(kind, suite, shard)) for ref, kind, suite in loaded]
    run_dir = Path(s.resume) if s.resume is not None else _new_locked_run_dir(s, held)
    problems = [p for _, _, suite in loaded for p in suite_problems(suite)]
    warnings = [f"{'skipped ' if p.action == 'skipped' else ''}{p.source}:{p.line}: {p.message}"  # sent: says so
                for p in problems]
    recorded: dict[str, Any] = {"repeats": s.repeats, "seed": s.seed, "limit": s.limit, "strict": s.strict,
                                "stream": s.stream, "options": s.options}
    if shard is not None:
        recorded["shard"] = shard.label
    if s.publish:
        recorded["publish"] = s.publish
    if s.budget is not None:
        recorded["budget"] = s.budget
    ledgers = _ledgers(s, endpoints, run_dir if resumed is not None else None)
    if s.probe_context:
        recorded["probe_context"] = True
    if s.sequential:  # the case order is drawn once and kept: --resume sends the same prefix
        kept = SequentialSettings.model_validate((resumed.settings.get("sequential") or {}) if resumed else {})
        recorded["sequential"] = SequentialSettings(
            look_every=kept.look_every if resumed else s.look_every,
            order={suite.manifest.name: kept.order.get(suite.manifest.name)
                   or draw_order([c.id for c in suite.cases], s.seed, suite.manifest.name)
                   for _, kind, suite in loaded if supports(kind)}).model_dump()
    return RunPlan(settings=s, endpoints=endpoints, loaded=loaded, run_dir=run_dir, resumed=resumed,
                   problems=problems, warnings=warnings, recorded_settings=recorded, ledgers=ledgers)


def _ledgers(s: RunSettings, endpoints: EndpointSet, resumed_dir: Path | None) -> dict[str, EndpointLedger]:
    """The budget ledgers; on ``--resume`` they start from what the records on disk already spent."""
    spent: dict[str, float] = {}
    if resumed_dir is not None and (resumed_dir / "records.jsonl").exists():
        prices = {e.name: e.price for e in endpoints.endpoints}
        for r in RecordStore(resumed_dir / "records.jsonl", read_only=True).read():
            price = prices.get(r.endpoint)
            amount = r.charged_usd if r.charged_usd is not None else (
                sum(usd(u, price) or 0.0 for u in [r.usage, *r.retried_usage]) if price is not None else 0.0)
            spent[r.endpoint] = spent.get(r.endpoint, 0.0) + amount
    try:
        return build_ledgers({e.name: e.price for e in endpoints.endpoints},
                             {e.name: e.budget for e in endpoints.endpoints}, s.budget, spent)
    except ValueError as e:
        raise InputError(str(e)) from None


def merge_stops(budget: StopInfo | None, settled: dict[str, Any] | None) -> StopInfo | None:
    """One ``stopped`` for the summary: the budget's when a cap ended the sending (the sequential counts kept in
    ``settled``), else the sequential one, else None."""
    if budget is not None:
        return budget.model_copy(update={"settled": settled}) if settled else budget
    return StopInfo.model_validate(settled) if settled else None


def _resume_manifest(s: RunSettings, run_dir: Path, held: contextlib.ExitStack) -> RunManifest:
    """Lock ``run_dir`` (the folder of ``--resume``) and take the settings the run was started with back into ``s``."""
    try:
        RunManifest.load(run_dir)  # a folder that is no run gets its own message, and no lock file
        held.callback(lock_run_dir(run_dir, "--resume").release)
        manifest = RunManifest.load(run_dir)  # again under the lock: what a finished writer left
    except StoreError as e:
        raise InputError(str(e)) from None
    st = manifest.settings
    s.repeats, s.seed, s.limit, s.strict = st.get("repeats", 1), st.get("seed", 0), st.get("limit"), st.get("strict",
                                                                                                            False)
    s.stream, s.options = st.get("stream"), dict(st.get("options", {}))
    if s.budget is None:  # a resumed run keeps its budget unless --budget raises (or lowers) it
        s.budget = st.get("budget")
    s.sequential = bool(st.get("sequential"))
    if s.shard is not None and _shard(s.shard) != _shard(st.get("shard")):
        raise InputError(f"--resume: the run was started with --shard {st.get('shard') or '(none)'}, "
                         f"not {s.shard}")
    s.shard = st.get("shard")
    s.publish = s.publish or dict(st.get("publish") or {})  # a caller that merged in its own flags wins
    return manifest


def _check_unchanged(manifest: RunManifest, loaded: LoadedSuites) -> None:
    """``--resume`` sends the rest of the same suites: a suite whose content changed is refused."""
    for ms, (_, _, suite) in zip(manifest.suites, loaded):
        if ms.manifest.content_hash != suite.manifest.content_hash:
            raise InputError(f"--resume: suite '{ms.ref}' changed since the run started "
                             f"(content hash {ms.manifest.content_hash[:12]} -> {suite.manifest.content_hash[:12]})")


def _new_locked_run_dir(s: RunSettings, held: contextlib.ExitStack) -> Path:
    run_dir = new_run_dir(s.out)
    held.callback(lock_run_dir(run_dir, "--out").release)
    if _has_content(run_dir):  # another run took the empty folder and finished before we locked it
        raise InputError(f"--out {run_dir}: folder exists and is not empty (use --resume {run_dir} to continue it)")
    s.out = run_dir  # so an interrupted caller can say where to --resume
    return run_dir


async def _send_and_score(plan: RunPlan, clock: RunClock) -> RunOutcome:
    """Open the clients, preflight them, write the manifest, run every suite, score: one run, in order."""
    s, endpoints = plan.settings, plan.endpoints
    clients = {e.name: EndpointClient(e, backoff_base=s.backoff_base, ledger=plan.ledgers.get(e.name))
               for e in endpoints.endpoints}
    async with contextlib.AsyncExitStack() as stack:
        for c in clients.values():
            await stack.enter_async_context(c)
        with clock.phase("preflight"):
            await _preflight(clients)
        manifest = _write_manifest(plan)
        store = RecordStore(plan.run_dir / "records.jsonl")
        stack.callback(store.close)
        progress = Progress(display=s.display_progress)
        ctx = RunContext(run_dir=plan.run_dir, store=store, clients=clients, reference=endpoints.reference,
                         candidates=endpoints.candidates, repeats=s.repeats, seed=s.seed, progress=progress,
                         options=kind_options(s))
        sequential: list[SequentialResult] = []
        early = EarlyScorer(store, endpoints.reference, [endpoints.reference, *endpoints.candidates])
        failures = await _run_suites(plan.loaded, ctx, plan.recorded_settings.get("sequential"), sequential, clock,
                                     early)
        with clock.phase("probes"):
            if s.probe_context:
                await context_probe.probe_endpoints(clients, endpoints, plan.run_dir)
            await format_probe.probe_endpoints(clients, endpoints, plan.run_dir)  # endpoints stating response_format
        failures += [c.stop.line() for c in clients.values() if c.stop.reason is not None]
        unsent = sum(c.stop.not_sent for c in clients.values())  # counted by the kinds' progress, never sent
        never_sent = unsent + store.refused_by_budget
        summary, duplicate_warnings = finish_run(
            plan.run_dir, manifest, plan.loaded, store, reference=endpoints.reference,
            candidates=endpoints.candidates, endpoint_info=endpoints.info(), problems=plan.problems,
            failures=failures, stopped=budget_stop(plan.ledgers, store.refused_by_budget), sequential=sequential,
            clock=clock, early=early,
            # requests never sent (a budget refusal, a stopped endpoint) were counted by their kind as failed exchanges
            settings={**_without_order(plan.recorded_settings), "progress": {"exchanges": progress.done - never_sent,
                                                                             "errors": progress.errors - never_sent,
                                                             "retries": progress.retries,
                                                             "resumed": progress.resumed, "not_sent": unsent}})
    return RunOutcome(run_dir=plan.run_dir, summary=summary, problems=failures, warnings=duplicate_warnings)


def _write_manifest(plan: RunPlan) -> RunManifest:
    old = plan.resumed
    manifest = RunManifest(
        run_id=old.run_id if old else new_run_id(plan.run_dir), started_at=old.started_at if old else _utcnow(),
        reference=plan.endpoints.reference, endpoints=manifest_endpoints(plan.endpoints),
        suites=[ManifestSuite(ref=ref, kind=kind.kind, manifest=suite.manifest) for ref, kind, suite in plan.loaded],
        settings=plan.recorded_settings, versions=package_versions(),
        resumed_at=(old.resumed_at + [_utcnow()]) if old else [])
    manifest.write(plan.run_dir)
    return manifest


async def _run_suites(loaded: LoadedSuites, ctx: RunContext, sequential: dict[str, Any] | None = None,
                      decided: list[SequentialResult] | None = None, clock: RunClock | None = None,
                      early: EarlyScorer | None = None) -> list[str]:
    """Each suite's kind sends its exchanges; one kind's crash is a failure line, the other suites still run.

    With ``early``, each suite is scored on a worker thread as soon as it has sent (while the next one sends).

    ``sequential`` (the manifest's ``--sequential`` settings): kinds that support it send look by look and each
    candidate's decisions are appended to ``decided``.
    """
    failures: list[str] = []
    with ctx.progress:
        ctx.progress.set_total(sum(_planned(kind, suite, ctx) for _, kind, suite in loaded))
        for ref, kind, suite in loaded:
            ctx.progress.set_label(suite.manifest.name)
            t, done = time.perf_counter(), ctx.progress.done
            try:
                if sequential is not None and decided is not None and supports(kind) and ctx.candidates:
                    decided += await run_sequential(kind, suite, ctx, SequentialSettings.model_validate(sequential),
                                                    SequentialPolicy.from_verdict())
                    continue
                if getattr(kind, "needs_reference_first", False) and ctx.candidates:
                    await kind.run(suite, dataclasses.replace(ctx, candidates=[]))
                await kind.run(suite, ctx)
            except Exception as e:  # noqa: BLE001 - one kind's bug must not lose the other suites' results
                log.exception("suite %s failed", ref)
                failures.append(f"suite '{suite.manifest.name}' failed while running: {type(e).__name__}: {e}")
            finally:  # also after the sequential branch's `continue`
                if clock is not None:
                    clock.suite(suite.manifest.name, time.perf_counter() - t, ctx.progress.done - done)
                if early is not None:
                    early.submit(kind, suite)
    return failures


# ----------------------------------------------------------------------------------------------------------
# the run folder, its manifest and the endpoints in it
# ----------------------------------------------------------------------------------------------------------

def _utcnow() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_run_dir(out: Path | None) -> Path:
    """``--out`` (must be new or empty) or ``runs/<UTC timestamp>`` (suffixed if taken).

    Every way the folder can be unusable (a file in the way, no permission, a path too long, a read-only
    file system) is an :class:`InputError` naming the path, so a typo costs one line, not a traceback.
    """
    if out is not None:
        out = Path(out)
        try:
            if out.exists() and not out.is_dir():
                raise InputError(f"--out {out}: exists and is not a folder")
            if out.is_dir() and _has_content(out):
                raise InputError(f"--out {out}: folder exists and is not empty (use --resume {out} to continue it)")
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"--out {out}: cannot create the run folder ({e.strerror or e})") from None
        return out
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    base = Path("runs") / stamp
    path, i = base, 2
    try:
        while path.exists():
            path, i = Path(f"{base}-{i}"), i + 1
        path.mkdir(parents=True)
    except OSError as e:
        raise InputError(f"cannot create the run folder {path} ({e.strerror or e}); "
                         "choose one with --out DIR") from None
    return path


def _has_content(folder: Path) -> bool:
    """Anything but the lock file (a run that died before writing its manifest leaves only that) and the cost plan
    of ``--dry-run --out`` (the run it planned may then use the same folder, and its report compares the two)."""
    return any(p.name not in (LOCK_NAME, PLAN_NAME) for p in folder.iterdir())


def lock_run_dir(run_dir: Path, flag: str) -> RunFolderLock:
    """Take the folder's writer lock; a live holder or an unwritable folder is an :class:`InputError` (exit 2)."""
    try:
        return RunFolderLock(run_dir).acquire()
    except RunFolderBusy as e:
        raise InputError(str(e)) from None
    except StoreError as e:
        raise InputError(f"{flag} {e}") from None


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in ("verifier", "httpx", "pydantic", "torch", "numpy", "scipy"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def kind_options(s: RunSettings) -> dict[str, Any]:
    opts = dict(s.options)
    opts.setdefault("limit", s.limit)
    opts.setdefault("strict", s.strict)
    opts.setdefault("seed", s.seed)  # anything a kind samples (e.g. the toolcall reference repeats) follows --seed
    if s.stream is not None:
        opts.setdefault("stream", s.stream)
    return {k: v for k, v in opts.items() if v is not None}


def _shard(text: str | None) -> Shard | None:
    """``--shard I/N`` parsed (None when not sharded); a malformed value is an :class:`InputError`."""
    if text is None:
        return None
    try:
        return Shard.parse(text)
    except ShardSpecError as e:
        raise InputError(str(e)) from None


async def _preflight(clients: dict[str, EndpointClient]) -> None:
    results = await asyncio.gather(*(c.preflight() for c in clients.values()), return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if not errors:
        return
    lines, code = [], 2
    for e in errors:
        if isinstance(e, EndpointError):
            lines.append(str(e))
            if e.kind in ("unreachable", "bad_response", "models_unavailable"):
                code = 3
        else:
            raise e
    raise RunFailed(lines, exit_code=code)


def _fingerprint_option(s: RunSettings, endpoints: EndpointSet) -> None:
    """``kl_profiles``: from ``--option`` or the TOML's ``[fingerprint]``; a missing or malformed file is an input
    error now, not a "no profiles" verdict after the whole run."""
    if endpoints.profiles and "kl_profiles" not in s.options:
        s.options = {**s.options, "kl_profiles": endpoints.profiles}
    if s.options.get("kl_profiles"):
        try:
            read_profile_file(Path(str(s.options["kl_profiles"])))
        except ValueError as e:
            raise InputError(f"kl_profiles: {e}") from None


def finish_run(run_dir: Path, manifest: RunManifest, loaded: LoadedSuites, store: RecordStore, *,
               reference: str, candidates: list[str], endpoint_info: list[Any], problems: list[InputProblem],
               failures: list[str], settings: dict[str, Any], stopped: StopInfo | None = None,
               sequential: list[SequentialResult] | None = None, clock: RunClock | None = None,
               early: EarlyScorer | None = None) -> tuple[RunSummary, list[str]]:
    """Score every suite from ``store``, write ``summary.json`` and close the manifest (completed/failed).

    Shared by ``verifier run`` and ``verifier merge`` (verifier/run/merge.py), so a merged run is scored by exactly
    the code that scores a whole one. Appends scoring failures to ``failures``; returns the summary and the
    duplicate-record warnings. ``clock``: the run's stopwatch; its timings (scoring included) go into the summary.
    ``early``: the suites already scored (or being scored) while the run sent; the others are scored here.
    """
    scoring_started = time.perf_counter()
    run_id, started = manifest.run_id, manifest.started_at
    results: list[EndpointSuiteResult] = []
    eps = [reference, *candidates]
    ok_by_endpoint = {n: [0, 0] for n in eps}
    every_record: list[ExchangeRecord] = []
    for _, kind, suite in loaded:
        records = store.read(suite=suite.manifest.name)
        every_record += records
        for r in records:
            if r.endpoint in ok_by_endpoint:
                ok_by_endpoint[r.endpoint][0] += r.ok
                ok_by_endpoint[r.endpoint][1] += 1
        score = (early.take(suite.manifest.name) if early is not None else None) \
            or score_suite(kind, suite, records, reference, eps)
        results += score.results
        failures += [score.failure] if score.failure else []
    for name, (ok, total) in ok_by_endpoint.items():
        said = any(f.startswith(f"endpoint '{name}': ") for f in failures)  # e.g. stopped: its line says why
        if total and not ok and not said:
            failures.append(f"endpoint '{name}': all {total} exchanges failed")
    duplicate_warnings = _note_duplicates(store, results)
    finished = _utcnow()
    # the logprob kind attaches each candidate's quantization fingerprint to its result; the summary
    # publishes them at the top level, where the report's disclosure cards and CI users look
    fingerprints = {r.endpoint: r.extra["fingerprint"] for r in results if "fingerprint" in r.extra}
    summary = RunSummary(
        run_id=run_id, started_at=started, finished_at=finished, verifier_version=package_versions().get("verifier",
                                                                                                         "0"),
        reference=reference, endpoints=endpoint_info,
        suites=[suite.manifest for _, _, suite in loaded], results=results, input_problems=problems,
        fingerprints=fingerprints, cost=with_plan(run_cost(every_record, endpoint_info), run_dir / PLAN_NAME),
        stopped=merge_stops(stopped, stopped_block(sequential, reference) if sequential else None),
        settings=settings, sequential=sequential or [])
    summary.claims = _claims(summary, run_dir)
    summary.verdicts = _verdicts(summary)
    if clock is not None:
        clock.add("scoring", time.perf_counter() - scoring_started)
        summary.timings = clock.timings()
    write_summary(run_dir, summary)
    manifest.finished_at = finished
    manifest.status = "failed" if failures else "completed"
    manifest.write(run_dir)
    return summary, duplicate_warnings


def _without_order(recorded: dict[str, Any]) -> dict[str, Any]:
    """The summary's settings: ``--sequential``'s case order stays in the manifest only (it lists every case)."""
    if "sequential" not in recorded:
        return recorded
    return {**recorded, "sequential": {k: v for k, v in recorded["sequential"].items() if k != "order"}}


def _note_duplicates(store: RecordStore, results: list[EndpointSuiteResult]) -> list[str]:
    """Say, in each affected result's notes and once as a warning, how many duplicated record lines scoring ignored.

    Duplicates come only from older versions or from two writers before the folder lock; scoring already
    counted each key once (the first line), and the note keeps that visible instead of silently fixing it.
    """
    dups = store.duplicates_on_read()
    if not dups:
        return []
    for r in results:
        n = dups.get((r.suite, r.endpoint))
        if n:
            r.notes.append(f"{n} duplicate record line(s) in records.jsonl ignored: each exchange counted once "
                           "(the first line of its key)")
    return [(f"records.jsonl: {sum(dups.values())} duplicate record line(s) ignored in scoring "
             "(written by an older version or by two runs at once); each exchange counted once")]


def _planned(kind: SuiteKind, suite: Any, ctx: RunContext) -> int:
    try:
        return int(kind.planned_exchanges(suite, ctx))
    except Exception:  # noqa: BLE001 - an estimate only; the bar then runs without a total
        return 0


def _claims(summary: RunSummary, run_dir: Path) -> dict:
    """Each endpoint's stated claims against the run's figures; a bug there is logged, never a lost summary."""
    try:
        return check_claims(summary, context_probe.load_probes(run_dir), format_probe.load_probes(run_dir))
    except Exception:  # noqa: BLE001 - the claims table is derived data; the figures it reads are still written
        log.exception("claims not checked")
        return {}


def _verdicts(summary: RunSummary) -> dict:
    """Per-candidate verdicts (verifier.run.verdict, default policy); a bug there is logged, never a lost summary."""
    try:
        return compute_verdicts(summary)
    except Exception:  # noqa: BLE001 - the verdict is derived data; the figures it reads are still written
        log.exception("verdicts not computed")
        return {}


def write_summary(run_dir: Path, summary: RunSummary) -> None:
    tmp = Path(run_dir) / "summary.json.tmp"
    tmp.write_text(display_json(summary, indent=2))  # a provider's lone surrogate must not lose the summary
    tmp.replace(Path(run_dir) / "summary.json")
