"""The suite kinds and the built-in suites, listed statically: what ``--suite`` can name.

Why static: every kind ships with the package, so a kind that fails to import is a broken install and should
fail loudly at start-up, not turn into "kind not available" in the middle of a run.

How a ``--suite`` value resolves (:func:`resolve`):
1. a built-in name (``toolcall-core``, ``toolcall-schemas``, ``agent-smoke``, ``agent-long``, or any
   ``logprob-*`` / ``cache-*`` name, which the logprob/cache kinds resolve themselves);
2. ``KIND:PATH`` (e.g. ``agent:my_scenarios.jsonl``) hands the path to that kind;
3. otherwise an existing file is loaded as a tool-call JSONL suite.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from suites import SUITES_DIR
from verifier.kinds.agent.kind import AGENT_KIND
from verifier.kinds.cache import kind as cache_kind
from verifier.kinds.logprob import kind as logprob_kind
from verifier.kinds.toolcall.kind import TOOLCALL_KIND, load_toolcall_suite
from verifier.run.protocol import LoadedSuiteLike, SuiteKind

TOOLCALL_DATA = SUITES_DIR / "toolcall" / "data"

#: kind name -> its SuiteKind object.
KINDS: dict[str, SuiteKind] = {
    "toolcall": TOOLCALL_KIND,
    "agent": AGENT_KIND,
    "logprob": logprob_kind.LOGPROB_KIND,
    "cache": cache_kind.CACHE_KIND,
}

#: Suites the logprob and cache kinds define themselves: name -> description.
KIND_BUILTINS: dict[str, dict[str, str]] = {
    "logprob": logprob_kind.BUILTIN_SUITES,
    "cache": cache_kind.BUILTIN_SUITES,
}

#: Name prefixes whose suites are defined by the kind itself (it receives the full name as its ref).
KIND_PREFIXES: dict[str, str] = {"logprob-": "logprob", "cache-": "cache"}


@dataclass(frozen=True)
class BuiltinSuite:
    name: str
    kind: str
    description: str
    path: Path | None = None  # toolcall data file
    version: str = "1"
    variants: str | None = None  # toolcall: "both" = every case streamed and non-streamed
    cases: int | None = None  # toolcall: only the first N cases of the data file (a named, hashed subset)


BUILTINS: dict[str, BuiltinSuite] = {
    s.name: s
    for s in (
        BuiltinSuite("toolcall-core", "toolcall",
                     "1,200 generated tool-call cases, 1-6 tools offered, 30% where no tool fits",
                     TOOLCALL_DATA / "toolcall-core.jsonl"),
        BuiltinSuite("toolcall-smoke", "toolcall",
                     "the first 100 cases of toolcall-core: the embedded default's quick look",
                     TOOLCALL_DATA / "toolcall-core.jsonl", cases=100),
        BuiltinSuite("toolcall-schemas", "toolcall",
                     "forced calls over many JSON Schema features, each streamed and non-streamed",
                     TOOLCALL_DATA / "toolcall-schemas.jsonl", variants="both"),
        BuiltinSuite("agent-smoke", "agent", "every agent environment at horizon 10"),
        BuiltinSuite("agent-long", "agent", "every agent environment at every horizon of the ladder"),
    )
}


#: What ``verifier run`` runs when no ``--suite`` is given and endpoints were named.
DEFAULT_SUITES: list[str] = ["toolcall-core"]

#: What the embedded default (no endpoints, no suites: the built-in engine and its quantised variants) runs:
#: every kind once, sized so the whole job ends in minutes on a 2-core CPU.
EMBEDDED_DEFAULT_SUITES: list[str] = ["toolcall-smoke", "agent-smoke", "logprob-smoke", "cache-smoke"]


class SuiteResolutionError(ValueError):
    """A ``--suite`` value that names nothing, or an unknown kind; one clear line."""


@dataclass(frozen=True)
class SuiteRef:
    """A resolved suite reference: which kind loads it and what ``ref`` to pass to ``kind.load``."""

    name: str
    kind: str
    load_ref: str
    builtin: BuiltinSuite | None = None


def get_kind(kind: str) -> SuiteKind:
    """The SuiteKind object for ``kind``."""
    if kind not in KINDS:
        raise SuiteResolutionError(f"unknown suite kind {kind!r} (known: {', '.join(KINDS)})")
    return KINDS[kind]


def resolve(ref: str) -> SuiteRef:
    """Map a ``--suite`` value to its kind (see the module docstring for the order)."""
    if ref in BUILTINS:
        b = BUILTINS[ref]
        return SuiteRef(name=ref, kind=b.kind, load_ref=str(b.path) if b.path else ref, builtin=b)
    for prefix, kind in KIND_PREFIXES.items():
        if ref.startswith(prefix):
            return SuiteRef(name=ref, kind=kind, load_ref=ref)
    head, sep, tail = ref.partition(":")
    if sep and head in KINDS and tail:
        return SuiteRef(name=Path(tail).stem, kind=head, load_ref=tail)
    if Path(ref).is_file():
        return SuiteRef(name=Path(ref).stem, kind="toolcall", load_ref=ref)
    known = ", ".join([*BUILTINS, *(p + "*" for p in KIND_PREFIXES)])
    raise SuiteResolutionError(f"suite {ref!r}: not a built-in suite ({known}) and no such file")


def load_suite(ref: str, options: dict[str, Any] | None = None) -> tuple[SuiteKind, LoadedSuiteLike]:
    """Resolve and load: returns ``(kind_object, loaded_suite)``; loaded suites have ``.manifest`` and ``.cases``."""
    options = dict(options or {})
    sref = resolve(ref)
    kind = get_kind(sref.kind)
    if sref.builtin is not None and sref.kind == "toolcall":
        b = sref.builtin
        if b.path is None:  # every built-in tool-call suite names its data file (BUILTINS above)
            raise SuiteResolutionError(f"built-in suite {b.name!r} has no data file")
        default = ("nonstream", "stream") if b.variants == "both" else (None,)
        if b.cases is not None:
            options["limit"] = min(b.cases, int(options.get("limit") or b.cases))
        suite = load_toolcall_suite(b.path, name=b.name, version=b.version, options=options, default_variants=default,
                                    source_label=f"builtin:{b.name}")
        return kind, suite
    return kind, kind.load(sref.load_ref, options)


class SuiteInfo(BaseModel):
    """One row of ``verifier suites list``."""

    name: str
    kind: str
    version: str | None = None
    cases: int | None = None
    content_hash: str | None = None
    description: str = ""
    error: str | None = None  # why the suite could not be loaded (e.g. its data file is missing)


def list_suites() -> list[SuiteInfo]:
    """Every built-in suite with its manifest figures (a kind that fails to load is listed with the error)."""
    rows: list[SuiteInfo] = []
    names: list[tuple[str, str, str]] = [(b.name, b.kind, b.description) for b in BUILTINS.values()]
    for kind, builtins in KIND_BUILTINS.items():
        names += [(n, kind, d) for n, d in builtins.items() if n not in BUILTINS]
    for name, kind, desc in names:
        try:
            _, suite = load_suite(name, {})
            m = suite.manifest
            rows.append(SuiteInfo(name=name, kind=kind, version=m.version, cases=m.case_count,
                                  content_hash=m.content_hash, description=desc))
        except Exception as exc:  # noqa: BLE001 - listing must survive any one broken kind
            rows.append(SuiteInfo(name=name, kind=kind, description=desc, error=str(exc).splitlines()[0][:200]))
    return rows
