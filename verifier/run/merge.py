"""``verifier merge DIR... --out DIR``: join the run folders of ``verifier run --shard I/N`` into one run.

The merged folder is a run folder like any other (manifest.json, records.jsonl, summary.json; the CLI then
indexes it into history and renders report.html, as after ``verifier run``), scored by the very code that scores a
whole run (:func:`verifier.run.runner.finish_run`) over the
whole suites and the union of the shards' records, so its counts are those of an unsharded run that got the
same answers. Nothing is sent: merging is offline.

Why so strict about what may be merged: a merge of shards that ran different suite files, other endpoints or
other settings would publish one set of figures that no single run could have produced, and a missing or
doubled shard would silently change every denominator. So every mismatch is refused with one line (exit 2)
before the output folder is created: the suites (by content hash), the endpoints (everything that shapes a
request: URL or built-in spec, model, headers, extra body, stream, timeout, retries; not rate or concurrency,
which change how fast, not what is asked), the settings (all but the shard), the shard count, and the set of
shard indices (each of 1..N exactly once). Each record must also belong to its folder's shard: a case recorded
in a folder whose shard does not own it means overlapping work, which is refused too.

Work a kind does once per endpoint rather than per case (the logprob method probe, recorded under a case id
that is not a suite case) is done by every shard; the merge keeps the lowest shard's record of each such key.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.records import ExchangeRecord
from verifier.run.errors import InputError
from verifier.run.loading import load_suites
from verifier.run.protocol import suite_problems
from verifier.run.runner import (
    RunOutcome,
    RunSettings,
    finish_run,
    kind_options,
    lock_run_dir,
    new_run_dir,
    package_versions,
)
from verifier.run.shard import Shard, ShardSpecError, case_key, shard_of
from verifier.run.store import ManifestEndpoint, RecordStore, RunManifest, StoreError, new_run_id
from verifier.run.summary import RunSummary, SummaryFileError

#: ManifestEndpoint fields that do not change what an endpoint is asked, so shards may differ in them.
PACING_FIELDS = ("rate", "concurrency")


@dataclass
class ShardRun:
    """One shard's finished run folder, as read for merging."""

    dir: Path
    manifest: RunManifest
    summary: RunSummary
    shard: Shard


@dataclass
class MergeSettings:
    """What ``verifier merge`` was asked to do (the CLI builds this; tests build it directly)."""

    dirs: list[Path]
    out: Path


def merge_runs(settings: MergeSettings) -> RunOutcome:
    """Check the shards belong together, then write the merged run folder; InputError (exit 2) on any mismatch."""
    shards = check_shards([read_shard(Path(d)) for d in _distinct(settings.dirs)])
    first = shards[0]
    base_settings = _without_shard(first.manifest.settings)
    loaded = load_suites([ms.ref for ms in first.manifest.suites], _options(base_settings))
    for ms, (_, _, suite) in zip(first.manifest.suites, loaded):
        if ms.manifest.content_hash != suite.manifest.content_hash:
            raise InputError(f"suite '{ms.ref}' changed since the shards ran "
                             f"(content hash {ms.manifest.content_hash[:12]} -> {suite.manifest.content_hash[:12]})")
    records = merged_records(shards, loaded)

    with contextlib.ExitStack() as held:
        run_dir = new_run_dir(settings.out)
        held.callback(lock_run_dir(run_dir, "--out").release)
        merged_from = [{"dir": str(s.dir), "run_id": s.manifest.run_id, "shard": s.shard.label} for s in shards]
        manifest = RunManifest(
            run_id=new_run_id(run_dir), started_at=min(s.manifest.started_at
                                                for s in shards), reference=first.manifest.reference,
            endpoints=first.manifest.endpoints, suites=first.manifest.suites,
            settings={**base_settings, "merged_from": merged_from}, versions=package_versions())
        manifest.write(run_dir)
        with RecordStore(run_dir / "records.jsonl") as store:
            for rec in records:
                store.append(rec)
        problems = [p for _, _, suite in loaded for p in suite_problems(suite)]
        failures: list[str] = []
        summary, warnings = finish_run(
            run_dir, manifest, loaded, RecordStore(run_dir / "records.jsonl"),
            reference=first.manifest.reference, candidates=[e.name for e in first.manifest.endpoints
                                                            if e.name != first.manifest.reference],
            endpoint_info=first.summary.endpoints, problems=problems, failures=failures,
            settings={**base_settings, "merged_from": merged_from, "progress": _progress(shards)})
    return RunOutcome(run_dir=run_dir, summary=summary, problems=failures, warnings=warnings)


def _distinct(dirs: list[Path]) -> list[Path]:
    if not dirs:
        raise InputError("merge: name the shard run folders to merge")
    seen: dict[Path, Path] = {}
    for d in dirs:
        key = Path(d).resolve()
        if key in seen:
            raise InputError(f"merge: folder {d} given twice")
        seen[key] = Path(d)
    return list(seen.values())


def read_shard(run_dir: Path) -> ShardRun:
    """One shard folder: a finished run started with ``--shard``; anything else is refused with one line."""
    try:
        manifest = RunManifest.load(run_dir)
    except StoreError as e:
        raise InputError(str(e)) from None
    label = manifest.settings.get("shard")
    if not label:
        raise InputError(f"{run_dir}: not a shard run (it was not started with --shard I/N)")
    try:
        shard = Shard.parse(label)
    except ShardSpecError as e:
        raise InputError(f"{run_dir}/manifest.json: bad shard setting ({e})") from None
    if manifest.status != "completed":
        raise InputError(f"{run_dir}: shard {label} did not complete (status {manifest.status}); "
                         f"finish it with: verifier run --resume {run_dir}")
    try:
        summary = RunSummary.read(run_dir)
    except SummaryFileError as e:
        raise InputError(str(e)) from None
    return ShardRun(dir=run_dir, manifest=manifest, summary=summary, shard=shard)


def check_shards(shards: list[ShardRun]) -> list[ShardRun]:
    """Refuse shards that do not make up exactly one run; returns them ordered by shard index."""
    first = shards[0]
    n = first.shard.count
    by_index: dict[int, ShardRun] = {}
    for s in shards:
        if s.shard.count != n:
            raise InputError(f"{s.dir} is shard {s.shard.label} but {first.dir} is shard {first.shard.label}: "
                             "different shard counts")
        if s.shard.index in by_index:
            raise InputError(f"shard {s.shard.label} given twice: {by_index[s.shard.index].dir} and {s.dir}")
        by_index[s.shard.index] = s
    missing = [f"{i}/{n}" for i in range(1, n + 1) if i not in by_index]
    if missing:
        raise InputError(f"missing shard(s) {', '.join(missing)} (given: "
                         f"{', '.join(by_index[i].shard.label for i in sorted(by_index))})")
    for s in shards[1:]:
        _same(first, s)
    return [by_index[i] for i in sorted(by_index)]


def _same(a: ShardRun, b: ShardRun) -> None:
    """One line naming the first thing in which shard ``b`` differs from shard ``a``."""
    where = f"{b.dir} (shard {b.shard.label}) and {a.dir} (shard {a.shard.label})"
    sa = [(ms.ref, ms.kind, ms.manifest.name, ms.manifest.content_hash) for ms in a.manifest.suites]
    sb = [(ms.ref, ms.kind, ms.manifest.name, ms.manifest.content_hash) for ms in b.manifest.suites]
    if sa != sb:
        raise InputError(f"{where} ran different suites: {_first_diff(sa, sb)}")
    if a.manifest.reference != b.manifest.reference:
        raise InputError(f"{where} have different references: {a.manifest.reference} vs {b.manifest.reference}")
    ea = [_endpoint_identity(e) for e in a.manifest.endpoints]
    eb = [_endpoint_identity(e) for e in b.manifest.endpoints]
    if ea != eb:
        raise InputError(f"{where} ran against different endpoints: {_first_diff(ea, eb)}")
    ta, tb = _without_shard(a.manifest.settings), _without_shard(b.manifest.settings)
    if ta != tb:
        keys = sorted(k for k in {*ta, *tb} if ta.get(k) != tb.get(k))
        raise InputError(f"{where} ran with different settings: "
                         + "; ".join(f"{k}: {ta.get(k)!r} vs {tb.get(k)!r}" for k in keys))


def _first_diff(a: list[Any], b: list[Any]) -> str:
    for x, y in zip(a, b):
        if x != y:
            return f"{x} vs {y}"
    return f"{len(a)} vs {len(b)} entries"


def _endpoint_identity(e: ManifestEndpoint) -> dict[str, Any]:
    """What makes two endpoint entries the same endpoint; a built-in engine's port differs per run, its spec not."""
    d = e.model_dump(exclude=set(PACING_FIELDS))
    if e.source.startswith("builtin:"):
        d.pop("base_url")
    return d


def _without_shard(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k not in ("shard", "progress")}


def _options(settings: dict[str, Any]) -> dict[str, Any]:
    """The kind options the shards loaded their suites with (as :func:`verifier.run.runner.kind_options` builds)."""
    return kind_options(RunSettings(limit=settings.get("limit"), strict=bool(settings.get("strict", False)),
                                     stream=settings.get("stream"), options=dict(settings.get("options") or {}),
                                     seed=int(settings.get("seed", 0) or 0)))


def merged_records(shards: list[ShardRun], loaded: list[tuple[str, Any, Any]]) -> list[ExchangeRecord]:
    """Every shard's records; a suite case recorded by a shard that does not own it is refused (overlap).

    Records under a key that is no suite case (once-per-endpoint work such as the logprob probe) are kept once,
    from the lowest shard index.
    """
    n = shards[0].shard.count
    owner: dict[str, dict[str, int]] = {}
    for _, kind, suite in loaded:
        owner[suite.manifest.name] = {c.id: shard_of(case_key(kind, c), n) for c in suite.cases}
    out: list[ExchangeRecord] = []
    seen: set[tuple] = set()
    for s in shards:
        path = s.dir / "records.jsonl"
        try:
            records = RecordStore(path, read_only=True).read() if path.exists() else []
        except StoreError as e:
            raise InputError(str(e)) from None
        for rec in records:
            cases = owner.get(rec.suite)
            if cases is None:
                raise InputError(f"{path}: a record of suite '{rec.suite}', which the shards' manifests do not name")
            home = cases.get(rec.case_id)
            if home is not None and home != s.shard.index:
                raise InputError(f"{path}: case '{rec.case_id}' of suite '{rec.suite}' belongs to shard {home}/{n}, "
                                 f"not {s.shard.label} (overlapping shards)")
            key = rec.key()
            if key in seen:
                continue
            seen.add(key)
            out.append(rec)
    return out


def _progress(shards: list[ShardRun]) -> dict[str, int]:
    """Exchanges, errors and retries summed over the shards' sessions (what the shards sent, all told)."""
    total = {"exchanges": 0, "errors": 0, "retries": 0}
    for s in shards:
        prog = s.summary.settings.get("progress") or {}
        for k in total:
            total[k] += int(prog.get(k, 0) or 0)
    return total
