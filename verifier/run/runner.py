"""Drive one run: folder, manifest, preflight, every suite kind against every endpoint, scoring, summary, report.

Suite kinds (toolcall, agent, logprob, cache) plug in through the :class:`SuiteKind` protocol and are found by
``verifier.run.registry``; this module knows nothing about what a kind measures. It owns the order of
events and the guarantees around them:

* nothing is sent before every input is checked (suite files, TOML, key env vars) and every endpoint has
  passed preflight (reachable, key accepted, model served), so mistakes cost seconds, not a half-run;
* every exchange lands in ``records.jsonl`` as it completes, so ``--resume DIR`` continues a killed run from
  the manifest alone: nothing recorded is lost or sent again, and requests that were in flight at the kill
  (sent, not yet recorded) are sent once more (the suites' content hashes must still match);
* one process writes a run folder at a time (:class:`~verifier.run.store.RunFolderLock`, held from the folder's
  creation or the resume until the report is written), and scoring counts each record key once;
* ``manifest.json`` and ``summary.json`` never contain a secret (only env var names; header values redacted).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import importlib
import importlib.metadata
import logging
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from verifier.http.client import EndpointClient, EndpointError
from verifier.http.endpoints import BuiltinServers, BuiltinStartError, EndpointConfigError, EndpointSet, check_keys, default_endpoints
from verifier.run.progress import Progress
from verifier.http.redaction import URL_USERINFO_MASK, redact_url
from verifier.records import EndpointConfig, ExchangeRecord, SuiteManifest
from verifier.run.shard import Shard, ShardSpecError, shard_suite
from verifier.run.store import (LOCK_NAME, ManifestEndpoint, ManifestSuite, RecordStore, RunFolderBusy, RunFolderLock,
                            RunManifest, StoreError, _first_line, display_json)
from verifier.run.summary import EndpointSuiteResult, InputProblem, RunSummary

log = logging.getLogger(__name__)

REDACTED = "<redacted>"


@dataclass
class RunContext:
    """What a suite kind gets to do its work: clients by endpoint name, the store, and the run's settings."""

    run_dir: Path
    store: RecordStore
    clients: dict[str, EndpointClient]
    reference: str
    candidates: list[str]
    repeats: int
    seed: int
    progress: Progress
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def endpoints(self) -> list[str]:
        """Reference first, then candidates: the order kinds should send in."""
        return [self.reference, *self.candidates]


class LoadedSuiteLike(Protocol):
    manifest: SuiteManifest
    cases: Any


@runtime_checkable
class SuiteKind(Protocol):
    """One per suite kind, registered in ``verifier.run.registry``.

    Optional attributes the runner honours: ``needs_reference_first: bool`` (run the reference to completion
    before any candidate, for kinds that compare against reference outputs while sending).
    """

    kind: str

    def load(self, ref: str, options: dict) -> LoadedSuiteLike: ...

    def planned_exchanges(self, suite: LoadedSuiteLike, ctx: RunContext) -> int: ...

    async def run(self, suite: LoadedSuiteLike, ctx: RunContext) -> None: ...

    def score(self, suite: LoadedSuiteLike, records: list[ExchangeRecord], reference: str,
              endpoints: list[str]) -> list[EndpointSuiteResult]: ...


class InputError(Exception):
    """Bad input (usage, files, env): exit code 2. The message is one line."""

    exit_code = 2


class RunFailed(Exception):
    """The run could not complete or produced nothing usable: exit code 3. ``lines`` say why."""

    exit_code = 3

    def __init__(self, lines: list[str], exit_code: int = 3) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines
        self.exit_code = exit_code


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
    db: Path | str | None = None  # history database: SQLite file or PostgreSQL URL (None: the default)
    history: bool = True
    render: bool = True
    display_progress: bool | None = None
    backoff_base: float = 0.5
    shard: str | None = None  # "I/N": run only this shard's cases of every suite (verifier.run.shard)


@dataclass
class RunOutcome:
    run_dir: Path
    summary: RunSummary
    problems: list[str] = field(default_factory=list)  # run-level failures (exit 3 when non-empty)
    warnings: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------------------------------------
# suite lookup
# ----------------------------------------------------------------------------------------------------------

def default_suites(embedded: bool = False) -> list[str]:
    """Suites run when none is named; ``embedded`` = the no-endpoint default against the built-in engine."""
    try:
        reg = importlib.import_module("verifier.run.registry")
    except ImportError:
        return ["toolcall-core"]
    if embedded:
        return list(getattr(reg, "EMBEDDED_DEFAULT_SUITES", ["toolcall-core"]))
    return list(getattr(reg, "DEFAULT_SUITES", ["toolcall-core"]))


def suites_to_run(requested: list[str], endpoints: EndpointSet) -> list[str]:
    """The named suites, or the default for these endpoints.

    When every endpoint is the built-in engine (no flags at all, or a config naming ``builtin:`` engines) the
    embedded default runs one small suite of every kind, sized for 2 cores; otherwise the remote default.
    """
    if requested:
        return list(requested)
    embedded = all(src.startswith("builtin:") for src in endpoints.sources.values())
    return default_suites(embedded=embedded)


def load_suite(ref: str, options: dict[str, Any]) -> tuple[SuiteKind, Any]:
    """(kind, loaded suite) for ``ref`` (a built-in name or a path), via ``verifier.run.registry``."""
    try:
        reg = importlib.import_module("verifier.run.registry")
    except ImportError as e:
        raise InputError(f"suite '{ref}': the suite registry is not available ({e})") from None
    try:
        _check_suite_file(ref, reg.resolve(ref))
        kind, suite = reg.load_suite(ref, options)
    except UnicodeDecodeError as e:  # a ValueError too: name the file, not only the codec
        raise InputError(f"--suite {ref}: not UTF-8 text ({_first_line(e)})") from None
    except (ValueError, KeyError, LookupError, FileNotFoundError) as e:  # SuiteLineError/SuiteResolutionError
        raise InputError(_first_line(e)) from None
    _check_has_cases(ref, suite)
    return kind, suite


_SNIFF_BYTES = 64 * 1024


def _check_suite_file(ref: str, sref: Any) -> None:
    """Refuse an empty, binary or non-UTF-8 suite file before any kind parses it, with one line naming it.

    Why here and not in each kind's parser: every kind reads text files, and a user who passes the wrong file
    (an image, a model checkpoint, a file truncated to nothing) should hear that, not a codec error or a run
    with zero cases. Only the first 64 KiB are sniffed; the parser still reports a bad byte further on.
    """
    if getattr(sref, "builtin", None) is not None:
        return
    path = Path(getattr(sref, "load_ref", ref))
    if not path.is_file():
        return
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError as e:
        raise InputError(f"--suite {ref}: cannot read the file ({e.strerror or e})") from None
    if not head.strip() and size <= len(head):
        raise InputError(f"--suite {ref}: the file is empty (no cases)")
    nul = head.find(b"\0")
    if nul >= 0:
        raise InputError(f"--suite {ref}: a binary file, not a text suite (NUL byte at offset {nul})")
    import codecs

    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=size <= len(head))
    except UnicodeDecodeError as e:
        raise InputError(f"--suite {ref}: not UTF-8 text "
                         f"(byte 0x{head[e.start]:02x} at offset {e.start})") from None


def _check_has_cases(ref: str, suite: Any) -> None:
    """A suite that loaded with zero cases (empty, or every line skipped as bad) is an input error, not a run."""
    if getattr(suite.manifest, "case_count", 1) != 0:
        return
    problems = list(getattr(suite, "problems", []) or [])
    why = ""
    if problems:
        p = problems[0]
        why = f" ({len(problems)} bad line(s) skipped; first: {p.source}:{p.line}: {p.message})"
    raise InputError(f"--suite {ref}: no cases to run{why}")


# ----------------------------------------------------------------------------------------------------------
# the run
# ----------------------------------------------------------------------------------------------------------

def _utcnow() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


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
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = Path("runs") / stamp
    path, i = base, 2
    try:
        while path.exists():
            path, i = Path(f"{base}-{i}"), i + 1
        path.mkdir(parents=True)
    except OSError as e:
        raise InputError(f"cannot create the run folder {path} ({e.strerror or e}); choose one with --out DIR") from None
    return path


def _has_content(folder: Path) -> bool:
    """Anything but the lock file (a run that died before writing its manifest leaves only that)."""
    return any(p.name != LOCK_NAME for p in folder.iterdir())


def lock_run_dir(run_dir: Path, flag: str) -> RunFolderLock:
    """Take the folder's writer lock; a live holder or an unwritable folder is an :class:`InputError` (exit 2)."""
    try:
        return RunFolderLock(run_dir).acquire()
    except RunFolderBusy as e:
        raise InputError(str(e)) from None
    except StoreError as e:
        raise InputError(f"{flag} {e}") from None


def _versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in ("verifier", "httpx", "pydantic", "torch", "numpy", "scipy"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _is_secret_header(name: str) -> bool:
    h = name.lower()
    return any(s in h for s in ("auth", "key", "token", "secret", "cookie", "password"))


def _manifest_endpoints(eps: EndpointSet) -> list[ManifestEndpoint]:
    out = []
    for e in eps.endpoints:
        spec = eps.builtin(e.name)
        headers = {k: (REDACTED if _is_secret_header(k) else v) for k, v in e.headers.items()}
        out.append(ManifestEndpoint(  # URL userinfo is a secret too: redacted, and --resume asks for --config
            name=e.name, source=redact_url(eps.sources.get(e.name, e.base_url)) or "",
            base_url=redact_url(e.base_url) or "", model=e.model,
            api_key_env=e.api_key_env, headers=headers, extra_body=e.extra_body, rate=e.rate,
            concurrency=e.concurrency, timeout=e.timeout, stream=e.stream, max_attempts=e.max_attempts,
            is_reference=e.name == eps.reference, builtin=spec.as_dict() if spec else None))
    return out


def _endpoints_from_manifest(m: RunManifest, override: EndpointSet | None) -> EndpointSet:
    """Rebuild the endpoint set for ``--resume``; secret headers must come back from the same ``--config``."""
    if override is not None:
        names = {e.name for e in m.endpoints}
        if {e.name for e in override.endpoints} != names:
            raise InputError(f"--resume: the endpoints given ({sorted(e.name for e in override.endpoints)}) "
                             f"differ from the run's ({sorted(names)})")
        override.reference = m.reference
        override.endpoints.sort(key=lambda c: c.name != m.reference)
        return override
    configs, sources = [], {}
    for me in m.endpoints:
        if REDACTED in me.headers.values() or URL_USERINFO_MASK in me.base_url:
            raise InputError(f"--resume: endpoint '{me.name}' used secret headers or URL credentials that are not stored; "
                             "pass the same --config again")
        base = me.source if me.source.startswith("builtin:") else me.base_url
        configs.append(EndpointConfig(name=me.name, base_url=base, model=me.model, api_key_env=me.api_key_env,
                                      headers=me.headers, extra_body=me.extra_body, rate=me.rate,
                                      concurrency=me.concurrency, timeout=me.timeout, stream=me.stream,
                                      max_attempts=me.max_attempts))
        sources[me.name] = me.source
    configs.sort(key=lambda c: c.name != m.reference)
    return EndpointSet(configs, m.reference, sources)


def _kind_options(s: RunSettings) -> dict[str, Any]:
    opts = dict(s.options)
    opts.setdefault("limit", s.limit)
    opts.setdefault("strict", s.strict)
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


def _load_suites(refs: list[str], options: dict[str, Any]) -> list[tuple[str, SuiteKind, Any]]:
    loaded = []
    for ref in refs:
        kind, suite = load_suite(ref, options)
        loaded.append((ref, kind, suite))
    names = [s.manifest.name for _, _, s in loaded]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise InputError(f"--suite: suite name(s) {sorted(dup)} given twice")
    return loaded


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
        from verifier.kinds.logprob.fingerprint import read_profile_file

        try:
            read_profile_file(Path(str(s.options["kl_profiles"])))
        except ValueError as e:
            raise InputError(f"kl_profiles: {e}") from None


def execute_run(settings: RunSettings) -> RunOutcome:
    """Run everything ``settings`` asks for; raises InputError (exit 2) or RunFailed (exit 3) with clear lines.

    The run folder's writer lock is held from the moment the folder is chosen until this returns.
    """
    with contextlib.ExitStack() as held:
        return _execute_run(settings, held)


def _execute_run(settings: RunSettings, held: contextlib.ExitStack) -> RunOutcome:
    s = settings
    warnings: list[str] = []
    if s.resume is not None:
        run_dir = Path(s.resume)
        try:
            RunManifest.load(run_dir)  # a folder that is no run gets its own message, and no lock file
            held.callback(lock_run_dir(run_dir, "--resume").release)
            manifest = RunManifest.load(run_dir)  # again under the lock: what a finished writer left
        except StoreError as e:
            raise InputError(str(e)) from None
        endpoints = _endpoints_from_manifest(manifest, s.endpoints)
        st = manifest.settings
        s.repeats, s.seed, s.limit, s.strict = st.get("repeats", 1), st.get("seed", 0), st.get("limit"), st.get("strict", False)
        s.stream, s.options = st.get("stream"), dict(st.get("options", {}))
        if s.shard is not None and _shard(s.shard) != _shard(st.get("shard")):
            raise InputError(f"--resume: the run was started with --shard {st.get('shard') or '(none)'}, "
                             f"not {s.shard}")
        s.shard = st.get("shard")
        refs = [ms.ref for ms in manifest.suites]
    else:
        manifest = None
        endpoints = s.endpoints
        if endpoints is None:
            endpoints = default_endpoints(stream=s.stream)
        refs = suites_to_run(s.suites, endpoints)
        run_dir = None
    try:
        check_keys(endpoints)
    except EndpointConfigError as e:
        raise InputError(str(e)) from None
    _fingerprint_option(s, endpoints)
    shard = _shard(s.shard)
    options = _kind_options(s)
    loaded = _load_suites(refs, options)
    if manifest is not None:
        for ms, (_, _, suite) in zip(manifest.suites, loaded):
            if ms.manifest.content_hash != suite.manifest.content_hash:
                raise InputError(f"--resume: suite '{ms.ref}' changed since the run started "
                                 f"(content hash {ms.manifest.content_hash[:12]} -> {suite.manifest.content_hash[:12]})")
    if shard is not None:  # after the hash check: the manifest keeps describing the whole suite
        loaded = [(ref, kind, shard_suite(kind, suite, shard)) for ref, kind, suite in loaded]
    if run_dir is None:
        run_dir = new_run_dir(s.out)
        held.callback(lock_run_dir(run_dir, "--out").release)
        if _has_content(run_dir):  # another run took the empty folder and finished before we locked it
            raise InputError(f"--out {run_dir}: folder exists and is not empty (use --resume {run_dir} to continue it)")
        s.out = run_dir  # so an interrupted caller can say where to --resume
    problems: list[InputProblem] = []
    for _, _, suite in loaded:
        problems += list(getattr(suite, "problems", []) or [])
    for p in problems:
        warnings.append(f"{'skipped ' if p.action == 'skipped' else ''}{p.source}:{p.line}: {p.message}")  # sent: says so

    started = manifest.started_at if manifest else _utcnow()
    run_id = manifest.run_id if manifest else run_dir.name
    settings_out = {"repeats": s.repeats, "seed": s.seed, "limit": s.limit, "strict": s.strict, "stream": s.stream,
                    "options": s.options}
    if shard is not None:
        settings_out["shard"] = shard.label
    try:
        with BuiltinServers(endpoints):
            outcome = asyncio.run(_run_async(s, endpoints, loaded, run_dir, manifest, started, run_id,
                                             settings_out, problems))
    except EndpointConfigError as e:
        raise InputError(str(e)) from None
    except BuiltinStartError as e:
        raise RunFailed([str(e)]) from None
    outcome.warnings = warnings + outcome.warnings
    return outcome


async def _run_async(s: RunSettings, endpoints: EndpointSet, loaded: list[tuple[str, SuiteKind, Any]], run_dir: Path,
                     old: RunManifest | None, started: str, run_id: str, settings_out: dict[str, Any],
                     problems: list[InputProblem]) -> RunOutcome:
    clients = {e.name: EndpointClient(e, backoff_base=s.backoff_base) for e in endpoints.endpoints}
    async with contextlib.AsyncExitStack() as stack:
        for c in clients.values():
            await stack.enter_async_context(c)
        await _preflight(clients)
        manifest = RunManifest(
            run_id=run_id, started_at=started, reference=endpoints.reference,
            endpoints=_manifest_endpoints(endpoints),
            suites=[ManifestSuite(ref=ref, kind=kind.kind, manifest=suite.manifest) for ref, kind, suite in loaded],
            settings=settings_out, versions=_versions(),
            resumed_at=(old.resumed_at + [_utcnow()]) if old else [])
        manifest.write(run_dir)
        store = RecordStore(run_dir / "records.jsonl")
        stack.callback(store.close)
        progress = Progress(display=s.display_progress)
        ctx = RunContext(run_dir=run_dir, store=store, clients=clients, reference=endpoints.reference,
                         candidates=endpoints.candidates, repeats=s.repeats, seed=s.seed, progress=progress,
                         options=_kind_options(s))
        failures: list[str] = []
        with progress:
            progress.set_total(sum(_planned(kind, suite, ctx) for _, kind, suite in loaded))
            for ref, kind, suite in loaded:
                progress.set_label(suite.manifest.name)
                try:
                    if getattr(kind, "needs_reference_first", False) and ctx.candidates:
                        ref_ctx = RunContext(**{**ctx.__dict__, "candidates": []})
                        await kind.run(suite, ref_ctx)
                    await kind.run(suite, ctx)
                except Exception as e:  # noqa: BLE001 - one kind's bug must not lose the other suites' results
                    log.exception("suite %s failed", ref)
                    failures.append(f"suite '{suite.manifest.name}' failed while running: {type(e).__name__}: {e}")
        summary, duplicate_warnings = finish_run(
            run_dir, manifest, loaded, store, reference=endpoints.reference, candidates=endpoints.candidates,
            endpoint_info=endpoints.info(), problems=problems, failures=failures,
            settings={**settings_out, "progress": {"exchanges": progress.done, "errors": progress.errors,
                                                    "retries": progress.retries, "resumed": progress.resumed}})
    outcome = RunOutcome(run_dir=run_dir, summary=summary, problems=failures, warnings=duplicate_warnings)
    history = s.history
    if "shard" in settings_out and history:
        # a shard's figures cover 1/N of each suite: beside whole runs in history they would read as drift
        outcome.warnings.append(f"shard {settings_out['shard']} not indexed into history; "
                                "`verifier merge` indexes the merged run")
        history = False
    outcome.warnings += publish(run_dir, history=history, db=s.db, render_report=s.render)
    return outcome


def finish_run(run_dir: Path, manifest: RunManifest, loaded: list[tuple[str, SuiteKind, Any]], store: RecordStore, *,
               reference: str, candidates: list[str], endpoint_info: list[Any], problems: list[InputProblem],
               failures: list[str], settings: dict[str, Any]) -> tuple[RunSummary, list[str]]:
    """Score every suite from ``store``, write ``summary.json`` and close the manifest (completed/failed).

    Shared by ``verifier run`` and ``verifier merge`` (verifier/run/merge.py), so a merged run is scored by exactly
    the code that scores a whole one. Appends scoring failures to ``failures``; returns the summary and the
    duplicate-record warnings.
    """
    run_id, started = manifest.run_id, manifest.started_at
    results: list[EndpointSuiteResult] = []
    eps = [reference, *candidates]
    ok_by_endpoint = {n: [0, 0] for n in eps}
    for ref, kind, suite in loaded:
        records = store.read(suite=suite.manifest.name)
        for r in records:
            if r.endpoint in ok_by_endpoint:
                ok_by_endpoint[r.endpoint][0] += r.ok
                ok_by_endpoint[r.endpoint][1] += 1
        try:
            results += kind.score(suite, records, reference, eps)
        except Exception as e:  # noqa: BLE001 - a scoring bug is reported, other suites still scored
            log.exception("scoring %s failed", ref)
            failures.append(f"suite '{suite.manifest.name}' failed while scoring: {type(e).__name__}: {e}")
    for name, (ok, total) in ok_by_endpoint.items():
        if total and not ok:
            failures.append(f"endpoint '{name}': all {total} exchanges failed")
    duplicate_warnings = _note_duplicates(store, results)
    finished = _utcnow()
    # the logprob kind attaches each candidate's quantization fingerprint to its result; the summary
    # publishes them at the top level, where the report's disclosure cards and CI users look
    fingerprints = {r.endpoint: r.extra["fingerprint"] for r in results if "fingerprint" in r.extra}
    summary = RunSummary(
        run_id=run_id, started_at=started, finished_at=finished, verifier_version=_versions().get("verifier", "0"),
        reference=reference, endpoints=endpoint_info,
        suites=[suite.manifest for _, _, suite in loaded], results=results, input_problems=problems,
        fingerprints=fingerprints,
        settings=settings)
    summary.verdicts = _verdicts(summary)
    write_summary(run_dir, summary)
    manifest.finished_at = finished
    manifest.status = "failed" if failures else "completed"
    manifest.write(run_dir)
    return summary, duplicate_warnings


def publish(run_dir: Path, *, history: bool, db: Any, render_report: bool) -> list[str]:
    """Index the finished run into history, then render report.html; returns warnings (never raises)."""
    warnings: list[str] = []
    # index first, so the report can chart this run beside the endpoint's history and test drift
    history_db: Any = None
    if history:
        problems = index_history(run_dir, db)
        warnings += problems
        if not problems:
            history_db = db or _default_db()
    if render_report:
        warnings += render(run_dir, history_db)
    return warnings


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


def _default_db() -> Any:
    try:
        from verifier.history import HistoryError, default_location
    except ImportError:
        return None
    try:
        return default_location()  # $VERIFIER_DB (path or URL) or the default file
    except HistoryError:
        return None


def _planned(kind: SuiteKind, suite: Any, ctx: RunContext) -> int:
    try:
        return int(kind.planned_exchanges(suite, ctx))
    except Exception:  # noqa: BLE001 - an estimate only; the bar then runs without a total
        return 0


def _verdicts(summary: RunSummary) -> dict:
    """Per-candidate verdicts (verifier.run.verdict, default policy); a bug there is logged, never a lost summary."""
    try:
        from verifier.run.verdict import compute_verdicts

        return compute_verdicts(summary)
    except Exception:  # noqa: BLE001 - the verdict is derived data; the figures it reads are still written
        log.exception("verdicts not computed")
        return {}


def write_summary(run_dir: Path, summary: RunSummary) -> None:
    tmp = Path(run_dir) / "summary.json.tmp"
    tmp.write_text(display_json(summary, indent=2))  # a provider's lone surrogate must not lose the summary
    tmp.replace(Path(run_dir) / "summary.json")


def render(run_dir: Path, db: Any = None) -> list[str]:
    """Write report.html via the report module (with the history section when ``db`` is given); a missing or
    broken renderer is a warning, never a lost run."""
    try:
        from reports.render import render_report
    except ImportError as e:
        return [f"report.html not written: the report renderer is not available ({e})"]
    try:
        render_report(Path(run_dir), db_path=db)
    except Exception as e:  # noqa: BLE001 - the run's data is safe on disk; say so and go on
        log.exception("report rendering failed")
        return [f"report.html not written: {type(e).__name__}: {_first_line(e)} "
                f"(retry with: verifier report {run_dir})"]
    return []


def index_history(run_dir: Path, db: Path | str | None) -> list[str]:
    try:
        from verifier.history import describe_db, index_run
    except ImportError as e:
        return [f"run not indexed into history: {e}"]
    try:
        index_run(Path(run_dir), db)
    except Exception as e:  # noqa: BLE001 - history is an index; the run folder is the record
        # describe_db: a PostgreSQL URL is shown without its credentials
        return [f"run not indexed into history ({describe_db(db)}): {type(e).__name__}: {_first_line(e)}"]
    return []
