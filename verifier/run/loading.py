"""Load: every ``--suite`` value resolved through the registry, sniffed and parsed, before anything is sent.

Why before: a wrong path, a binary file or a suite whose every line is bad should cost one line naming the file
(exit 2), not a half-run.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

from verifier.http.endpoints import EndpointSet
from verifier.run import registry
from verifier.run.errors import InputError
from verifier.run.protocol import SuiteKind, suite_problems
from verifier.run.store import _first_line

#: (the --suite value, its kind, the loaded suite): what the runner carries from loading to scoring.
LoadedSuites = list[tuple[str, SuiteKind, Any]]



def default_suites(embedded: bool = False) -> list[str]:
    """Suites run when none is named; ``embedded`` = the no-endpoint default against the built-in engine."""
    return list(registry.EMBEDDED_DEFAULT_SUITES if embedded else registry.DEFAULT_SUITES)


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
        _check_suite_file(ref, registry.resolve(ref))
        kind, suite = registry.load_suite(ref, options)
    except UnicodeDecodeError as e:  # a ValueError too: name the file, not only the codec
        raise InputError(f"--suite {ref}: not UTF-8 text ({_first_line(e)})") from None
    except (ValueError, KeyError, LookupError, FileNotFoundError) as e:  # SuiteLineError/SuiteResolutionError
        raise InputError(_first_line(e)) from None
    _check_has_cases(ref, suite)
    return kind, suite


_SNIFF_BYTES = 64 * 1024


def _check_suite_file(ref: str, sref: registry.SuiteRef) -> None:
    """Refuse an empty, binary or non-UTF-8 suite file before any kind parses it, with one line naming it.

    Why here and not in each kind's parser: every kind reads text files, and a user who passes the wrong file
    (an image, a model checkpoint, a file truncated to nothing) should hear that, not a codec error or a run
    with zero cases. Only the first 64 KiB are sniffed; the parser still reports a bad byte further on.
    """
    if sref.builtin is not None:
        return
    path = Path(sref.load_ref)
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
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=size <= len(head))
    except UnicodeDecodeError as e:
        raise InputError(f"--suite {ref}: not UTF-8 text "
                         f"(byte 0x{head[e.start]:02x} at offset {e.start})") from None


def _check_has_cases(ref: str, suite: Any) -> None:
    """A suite that loaded with zero cases (empty, or every line skipped as bad) is an input error, not a run."""
    if suite.manifest.case_count != 0:
        return
    problems = suite_problems(suite)
    why = ""
    if problems:
        p = problems[0]
        why = f" ({len(problems)} bad line(s) skipped; first: {p.source}:{p.line}: {p.message})"
    raise InputError(f"--suite {ref}: no cases to run{why}")


def load_suites(refs: list[str], options: dict[str, Any]) -> LoadedSuites:
    loaded = []
    for ref in refs:
        kind, suite = load_suite(ref, options)
        loaded.append((ref, kind, suite))
    names = [s.manifest.name for _, _, s in loaded]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise InputError(f"--suite: suite name(s) {sorted(dup)} given twice")
    return loaded
