"""``verifier run``, ``verifier merge`` and ``verifier report`` (registered on the app in ``verifier.cli``).

``verifier run`` replays suites against endpoints and writes a run folder; ``verifier merge`` joins shards into
one; ``verifier report DIR`` re-renders a run offline. Each composes through :mod:`verifier.cli.compose`:
measure (or merge), then index into history, then render the report.

Exit codes: 0 the run ran; 2 usage or input error (bad flag, bad file, key env var unset, 401, unknown
model); 3 the run failed (endpoint unreachable, a suite crashed, every exchange of an endpoint failed).
Every error is one line on stderr.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console

from verifier import history as history_store
from verifier.cli.compose import Publish, gate_outcome, merge_and_publish, plan_cost, render, run_and_publish
from verifier.cli.cost_table import cost_plan_tables, source_lines
from verifier.history import HistoryError
from verifier.http.endpoints import EndpointConfigError, check_key_env_name, from_flags, load_config
from verifier.run.errors import InputError, RunFailed
from verifier.run.merge import MergeSettings
from verifier.run.runner import RunSettings
from verifier.run.store import RunManifest, StoreError
from verifier.run.usage_line import verdict_usage

_out = Console(highlight=False, soft_wrap=True)


def _fail(message: str, code: int) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def _ints(values: list[str] | None, flag: str) -> list[int] | None:
    """Repeatable and/or comma-separated integers (``--horizon 10 --horizon 25`` or ``--horizon 10,25``)."""
    if not values:
        return None
    out = []
    for v in values:
        for part in str(v).split(","):
            part = part.strip()
            if not part:
                continue
            try:
                out.append(int(part))
            except ValueError:
                _fail(f"{flag}: '{part}' is not an integer", 2)
    return out


def _option_value(raw: str) -> Any:
    """A JSON literal when it parses as one (numbers, true/false, lists), else the plain string (paths)."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def run(
    suite: list[str] | None = typer.Option(None, "--suite", "-s", help="Suite path or built-in name (repeatable)."),
    reference: str | None = typer.Option(None, "--reference",
                                            help="Reference endpoint: \\[name=]URL or builtin:..."),
    endpoint: list[str] | None = typer.Option(None, "--endpoint", "-e",
                                                 help="Candidate endpoint \\[name=]URL (repeatable)."),
    model: str | None = typer.Option(None, "--model",
                                        help="Model id for URL endpoints (default: first of GET /models)."),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Name of the env var holding the API key."),
    config: Path | None = typer.Option(None, "--config", help="TOML endpoints file."),
    out: Path | None = typer.Option(None, "--out", help="Run folder (default runs/<UTC timestamp>)."),
    resume: Path | None = typer.Option(None, "--resume", help="Continue a killed run in this folder."),
    repeats: int = typer.Option(1, "--repeats", min=1, help="Run each case K times (run-to-run spread)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first N cases of each suite."),
    strict: bool = typer.Option(False, "--strict", help="Stop at the first bad suite line instead of skipping it."),
    stream: bool | None = typer.Option(None, "--stream/--no-stream",
                                          help="Force streaming on/off for all endpoints."),
    horizon: list[str] | None = typer.Option(None, "--horizon", help="Agent horizons (repeatable or comma list)."),
    trials: int | None = typer.Option(None, "--trials", min=1, help="Agent trials per scenario (pass^k)."),
    seed: int = typer.Option(0, "--seed", help="Seed for anything sampled."),
    db: str | None = typer.Option(None, "--db", metavar="PATH|URL",
                                     help="History database to index the run into: a SQLite file or "
                                          "postgresql://user@host:port/dbname (default $VERIFIER_DB)."),
    no_history: bool = typer.Option(False, "--no-history", help="Do not index the run into the history database."),
    concurrency: int | None = typer.Option(None, "--concurrency", min=1,
                                              help="Override every endpoint's concurrency."),
    rate: float | None = typer.Option(None, "--rate", min=0.0, help="Override every endpoint's rate (req/s)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    shard: str | None = typer.Option(None, "--shard", help="Run only shard I of N of every suite's cases "
                                        "(I/N; join the shards with verifier merge)."),
    reference_repeat_share: float | None = typer.Option(
        None, "--reference-repeat-share", min=0.0, max=1.0,
        help="Share of tool-call cases the reference answers twice, to measure its own run-to-run agreement "
             "(default 0.5, at least 50 cases; 0 turns it off)."),
    probe_context: bool = typer.Option(False, "--probe-context",
                                       help="Check each stated context_length with one request near it "
                                            "(costs that many prompt tokens)."),
    option: list[str] | None = typer.Option(
        None, "--option", "-o",
        help="Suite-kind option KEY=VALUE (repeatable), e.g. tokenizer=PATH, kl_profiles=FILE, top_logprobs=5."),
    budget: float | None = typer.Option(None, "--budget", min=0.0,
                                           help="USD the whole run may spend (priced endpoints); it stops "
                                                "sending at the cap and can be resumed with a higher --budget."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Send nothing: print what the run would send and cost "
                                                          "per endpoint and suite, and write plan.json in --out."),
    sequential: bool = typer.Option(
        False, "--sequential",
        help="Anytime-valid early stopping: cases in a seeded random order, each candidate stops once every "
             "headline is settled (docs/verdict.md, 'Sequential mode')."),
    look_every: int | None = typer.Option(None, "--look-every", min=1,
                                          help="With --sequential: judge the headlines every N cases (default 50)."),
) -> None:
    """Replay suites against the reference and candidate endpoints; write manifest, records, summary, report."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if api_key_env is not None:  # first: a key pasted here is refused (unshown) whatever else is wrong
            check_key_env_name(api_key_env, "--api-key-env")
        if config is not None:
            if reference or endpoint:
                _fail("--config and --reference/--endpoint are exclusive; put every endpoint in the file", 2)
            eps = load_config(config, stream=stream, api_key_env=api_key_env)
            if model:
                for e in eps.endpoints:
                    if e.model is None and not eps.sources[e.name].startswith("builtin:"):
                        e.model = model
        elif resume is not None and not reference and not endpoint:
            eps = None
        elif endpoint and not reference and resume is None:
            # the first --endpoint once became the reference silently: nothing was compared, and exit 0 read as a pass
            _fail("--endpoint needs --reference: name the endpoint to compare against, e.g. --reference "
                  "ref=https://trusted.example/v1, or --reference builtin:tiny for the built-in engine", 2)
        else:
            eps = from_flags(reference, endpoint or [], model=model, api_key_env=api_key_env, stream=stream)
        if eps is not None:
            for e in eps.endpoints:
                if concurrency is not None:
                    e.concurrency = concurrency
                if rate is not None:
                    e.rate = rate or None
    except EndpointConfigError as e:
        _fail(str(e), 2)
        return
    if look_every is not None and not sequential:
        _fail("--look-every needs --sequential (it sets how often a sequential run judges its headlines)", 2)
    options: dict[str, Any] = {}
    hz = _ints(horizon, "--horizon")
    if hz:
        options["horizon"] = hz
    if trials is not None:
        options["trials"] = trials
    for item in option or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            _fail(f"--option: '{item}' is not KEY=VALUE", 2)
        options[key.strip()] = _option_value(raw)
    if reference_repeat_share is not None:
        options["reference_repeat_share"] = reference_repeat_share
    settings = RunSettings(suites=list(suite or []), endpoints=eps, out=out, resume=resume, repeats=repeats, seed=seed,
                           limit=limit, strict=strict, stream=stream, options=options,
                           display_progress=False if quiet else None, shard=shard, budget=budget,
                           probe_context=probe_context, sequential=sequential, look_every=look_every or 50)
    if dry_run:
        if resume is not None:
            _fail("--dry-run plans a new run; it cannot be combined with --resume", 2)
        _dry_run(settings, Publish(history=not no_history, db=db))
        return
    try:
        outcome = run_and_publish(settings, Publish(history=not no_history, db=db))
    except InputError as e:
        _fail(str(e), 2)
        return
    except RunFailed as e:
        for line in e.lines[:-1]:
            print(f"error: {line}", file=sys.stderr)
        _fail(e.lines[-1] if e.lines else "run failed", e.exit_code)
        return
    except KeyboardInterrupt:
        where = settings.resume or settings.out or "the run folder"
        print(f"interrupted; records so far are on disk. Continue with: verifier run --resume {where}", file=sys.stderr)
        raise typer.Exit(130) from None
    for w in outcome.warnings:
        print(f"warning: {w}", file=sys.stderr)
    _print_summary(outcome)
    if not settings.shard and (outcome.run_dir / "summary.json").exists():
        gate_db = None if no_history else (db or _run_db(outcome.run_dir) or _quiet_default_db())
        _out.print(gate_outcome(outcome.run_dir, gate_db), markup=False, highlight=False)
    if outcome.problems:
        for line in outcome.problems[:-1]:
            print(f"error: {line}", file=sys.stderr)
        _fail(outcome.problems[-1], 3)


def _dry_run(settings: RunSettings, publish_to: Publish) -> None:
    """Print the cost plan (``verifier.run.dry_run``) as a table; nothing is sent."""
    try:
        run_dir, plan, warnings = plan_cost(settings, publish_to)
    except InputError as e:
        _fail(str(e), 2)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    _out.print("verifier run --dry-run: nothing was sent", markup=False)
    for table in cost_plan_tables(plan):
        _out.print(table)
    for line in source_lines(plan):
        _out.print(line, markup=False)
    for note in plan.notes:
        _out.print(f"note: {note}", markup=False)
    _out.print(f"plan: {run_dir / 'plan.json'}  (expected ${plan.usd:.4f}, at most ${plan.usd_high:.4f})",
               markup=False)


def merge(
    dirs: list[Path] = typer.Argument(..., help="The run folders of verifier run --shard 1/N ... N/N."),
    out: Path = typer.Option(..., "--out", help="Folder for the merged run (new or empty)."),
    db: str | None = typer.Option(None, "--db", metavar="PATH|URL",
                                     help="History database to index the merged run into: a SQLite file or "
                                          "postgresql://user@host:port/dbname (default $VERIFIER_DB)."),
    no_history: bool = typer.Option(False, "--no-history", help="Do not index the merged run into history."),
) -> None:
    """Join the folders of a sharded run into one run folder (records, summary, report), without any network."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        outcome = merge_and_publish(MergeSettings(dirs=list(dirs), out=out), Publish(history=not no_history, db=db))
    except InputError as e:
        _fail(str(e), 2)
        return
    for w in outcome.warnings:
        print(f"warning: {w}", file=sys.stderr)
    _out.print(f"merged shards: {', '.join(m['shard'] for m in outcome.summary.settings.get('merged_from', []))}",
               markup=False)
    _print_summary(outcome)
    if outcome.problems:
        for line in outcome.problems[:-1]:
            print(f"error: {line}", file=sys.stderr)
        _fail(outcome.problems[-1], 3)


def _print_summary(outcome: Any) -> None:
    s = outcome.summary
    _out.print(f"run folder: {outcome.run_dir}")
    prog = s.settings.get("progress") or {}
    if prog:
        resumed = prog.get("resumed") or 0
        _out.print(f"exchanges in this run: {prog.get('exchanges', 0)}, errors {prog.get('errors', 0)}, "
                   f"retries {prog.get('retries', 0)}" + (f" ({resumed} recorded before --resume)" if resumed else ""),
                   markup=False)
    for r in s.results:
        shown = []
        for key in ("trigger_f1", "schema_accuracy", "forced_call_success", "task_success", "kl_mean", "cache_hit_rate",
                    "error_rate"):
            iv = r.metrics.get(key)
            if iv is not None and iv.value is not None:
                shown.append(f"{key}={iv.value:.3f} [{_fmt(iv.low)}, {_fmt(iv.high)}] n={iv.n}")
        tag = " (reference)" if r.is_reference else ""
        _out.print(f"  {r.suite} / {r.endpoint}{tag}: " + ("; ".join(shown) or "no headline metric"), markup=False)
    for name, c in s.cost.items():
        usd = "no price" if c.usd is None else f"${c.usd:.4f}"
        _out.print(f"  cost {name}: {usd} ({c.requests} requests, {c.with_usage} reported usage; prompt "
                   f"{c.prompt_tokens} incl. {c.cached_tokens} cached, completion {c.completion_tokens})", markup=False)
    if s.stopped is not None and s.stopped.reason == "budget":
        _out.print(f"STOPPED by budget: {s.stopped.refused} requests not sent; continue with verifier run --resume "
                   f"{outcome.run_dir} --budget USD", markup=False)
    for q in s.sequential:  # --sequential: the anytime-valid decisions, and the cases they took
        heads = ", ".join(f"{h.metric} {h.status}" + (f" [{h.low:+.3f}, {h.high:+.3f}] on {h.units} cases"
                                                       if h.low is not None and h.high is not None else "")
                          for h in q.headlines)
        said = f"settled after {q.cases:,} of {q.of:,} cases" if q.settled else f"not settled after {q.cases:,} cases"
        _out.print(f"SEQUENTIAL {q.suite} / {q.endpoint}: {said}: {heads or 'no headline measured'}", markup=False)
    for v in s.verdicts.values():  # the answer, last, where the eye lands (docs/verdict.md)
        _out.print(f"{v.status.upper()}: {v.headline}", markup=False, highlight=False)
        usage = verdict_usage(s, v.endpoint, v)  # cases used, cost, a budget stop: beside the verdict
        for line in (usage.text, usage.limit):
            if line:
                _out.print(f"  {v.endpoint}: {line}", markup=False, highlight=False)
    report = Path(outcome.run_dir) / "report.html"
    if report.exists():
        _out.print(f"report: {report}")


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def report(run_dir: Path = typer.Argument(..., help="A run folder (with summary.json)."),
           db: str | None = typer.Option(None, "--db", metavar="PATH|URL",
                                            help="History database (SQLite file or PostgreSQL URL) for the "
                                                 "history/drift section (default: the default one, when it exists)."),
           no_history: bool = typer.Option(False, "--no-history", help="Leave the history section out.")) -> None:
    """Re-render report.html from a run folder, without any network access."""
    if not (run_dir / "summary.json").exists():
        _fail(f"{run_dir}: no summary.json; not a finished run folder", 2)
    if db is not None and not history_store.history_exists(db):
        # describe_db: never the raw URL, it may carry a password
        _fail(f"--db {history_store.describe_db(db)}: no such history database", 2)
    history_db = None if no_history else (db or _run_db(run_dir) or _existing_default_db())
    warnings = render(run_dir, history_db)
    if warnings:
        _fail(warnings[0], 3)
    print(run_dir / "report.html")


def _run_db(run_dir: Path) -> str | None:
    """The history database the run indexed into (kept in its manifest), when it was named and still exists;
    the report then draws the run beside its own history, not the default database's."""
    try:
        recorded = RunManifest.load(run_dir).settings.get("publish") or {}
    except StoreError:
        return None
    db = recorded.get("db")
    if not recorded.get("history", True) or db is None or recorded.get("db_redacted"):
        return None
    return str(db) if history_store.history_exists(str(db)) else None


def _quiet_default_db() -> Any:
    """The default history when there is one; None (never an exit) when $VERIFIER_DB cannot be read."""
    try:
        loc = history_store.default_location()
    except HistoryError:
        return None
    return loc if loc.exists() else None


def _existing_default_db() -> Any:
    """The default history (``$VERIFIER_DB`` path or URL, else the default file) when there is one."""
    try:
        loc = history_store.default_location()
    except HistoryError as e:
        _fail(str(e), 2)
    return loc if loc.exists() else None
