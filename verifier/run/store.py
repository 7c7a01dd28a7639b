"""What a run folder holds on disk: the append-only record log and the run manifest.

``records.jsonl`` is the ground truth of a run: every exchange is appended (and flushed to the OS) the moment it
completes, so a run killed at any instant loses at most the exchange that was in flight, and ``--resume`` can
tell exactly which exchanges exist by their :meth:`~verifier.records.ExchangeRecord.key`. A kill can tear the
last line; readers ignore a final line without its newline, and the first append trims it, so resume always
works. fsync is
"light": at most every ``fsync_interval_s`` and on close, because a per-record fsync would cost more than the
request on a fast endpoint while flush alone already survives a process kill (only a power cut needs fsync).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from verifier.records import (
    BUDGET_REFUSED,
    NOT_SENT,
    ExchangeRecord,
    Price,
    StatedClaims,
    SuiteManifest,
    read_json_model,
)

log = logging.getLogger(__name__)

_KEY_FIELDS = ("suite", "case_id", "endpoint", "repeat", "step", "variant")


class StoreError(ValueError):
    """A record file that cannot be read; the message names the file and line."""


class RecordStore:
    """``records.jsonl`` in a run folder: append-only, one :class:`ExchangeRecord` per line, flushed per record.

    Appending a record whose key is already on disk is a no-op (counted in ``duplicates_dropped``): the
    guarantee "no exchange duplicated" holds even if a caller forgets to skip done keys on resume. That holds
    within one process; across processes :class:`RunFolderLock` keeps a second writer out. A file that already
    holds a key twice (written by an older version, or by two runs at once before the lock existed) is read
    with the first line of each key only: see :meth:`duplicates_on_read`.
    """

    def __init__(self, path: Path, *, fsync_interval_s: float = 1.0, read_only: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fsync_interval = fsync_interval_s
        self._last_fsync = time.monotonic()
        self.duplicates_dropped = 0
        self.refused_by_budget = 0
        self.torn_bytes_trimmed = 0
        self._read_duplicates: Counter[tuple[str, str]] = Counter()
        self.read_only = read_only
        # a writer needs every key on disk before its first append; a reader (the report, a merge) parses each
        # line once, in read(), and builds the key set only if asked (done_keys, len)
        self._key_set: set[tuple] | None = None if read_only else set(self._scan_keys())
        self._fh: Any = None  # opened on the first append, so readers (report, scoring) never hold a write handle

    @property
    def _keys(self) -> set[tuple]:
        if self._key_set is None:
            self._key_set = set(self._scan_keys())
        return self._key_set

    # writing ---------------------------------------------------------------------------------------------
    def append(self, record: ExchangeRecord) -> None:
        """Write one record as one line and flush it; thread-safe and safe from concurrent asyncio tasks.

        An exchange the budget refused (``error_class`` :data:`~verifier.records.BUDGET_REFUSED`) was never sent: it
        is not written, so scoring does not count it and ``--resume`` sends it (``refused_by_budget`` counts them).
        """
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only")
        if record.error_class == NOT_SENT:
            return  # never sent (its endpoint was stopped): nothing was measured, and --resume must send it
        if record.error_class == BUDGET_REFUSED:
            self.refused_by_budget += 1
            return
        key = record.key()
        line = record_line(record)
        with self._lock:
            if key in self._keys:
                self.duplicates_dropped += 1
                log.warning("dropped duplicate record %s", key)
                return
            if self._fh is None:
                self.torn_bytes_trimmed = self._trim_torn_tail()
                self._fh = open(self.path, "ab")
            self._fh.write(line)
            self._fh.flush()
            self._keys.add(key)
            now = time.monotonic()
            if now - self._last_fsync >= self._fsync_interval:
                os.fsync(self._fh.fileno())
                self._last_fsync = now

    def close(self) -> None:
        with self._lock:
            if self._fh is not None and not self._fh.closed:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()

    def __enter__(self) -> RecordStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # reading ---------------------------------------------------------------------------------------------
    def done_keys(self) -> set[tuple]:
        """Keys of every record on disk (and appended since opening): what ``--resume`` must not send again."""
        with self._lock:
            return set(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def read(self, *, kind: str | None = None, suite: str | None = None) -> list[ExchangeRecord]:
        """All records, optionally filtered; validated into :class:`ExchangeRecord` (scoring wants types)."""
        out = []
        # cheap pre-filter before a full parse, only for values that serialise verbatim (plain ASCII, no escapes)
        # (a line written with other spacing, e.g. by another tool, lacks the compact key and is parsed in full)
        needles = [(f'"{k}":"'.encode(), f'"{k}":"{v}"'.encode()) for k, v in (("kind", kind), ("suite", suite))
                   if v is not None and v.isascii() and v.isprintable() and '"' not in v and "\\" not in v]
        for lineno, raw in self._lines():
            if any(key in raw and value not in raw for key, value in needles):
                continue
            try:
                rec = parse_record_line(raw)
            except ValueError as e:
                raise StoreError(f"{self.path}:{lineno}: not a valid record ({_first_line(e)})") from None
            if (kind is None or rec.kind == kind) and (suite is None or rec.suite == suite):
                out.append(rec)
        return self._first_of_each_key(out)

    def _first_of_each_key(self, records: list[ExchangeRecord]) -> list[ExchangeRecord]:
        """Keep the first record of each key, in file order, and count the later ones per (suite, endpoint).

        Why the first: it is the exchange ``--resume`` saw as done (the store's key set is built from the first
        occurrence), and scoring must count each (suite, case, endpoint, repeat, step, variant) once, whatever
        an older version or a concurrent writer left in the file.
        """
        seen: set[tuple] = set()
        kept: list[ExchangeRecord] = []
        dropped: Counter[tuple[str, str]] = Counter()
        for rec in records:
            key = rec.key()
            if key in seen:
                dropped[(rec.suite, rec.endpoint)] += 1
                continue
            seen.add(key)
            kept.append(rec)
        if dropped:
            with self._lock:
                for where, n in dropped.items():
                    self._read_duplicates[where] = max(self._read_duplicates[where], n)
            log.warning("%s: %d duplicate record line(s) ignored (first of each key kept)", self.path,
                        sum(dropped.values()))
        return kept

    def duplicates_on_read(self) -> dict[tuple[str, str], int]:
        """(suite, endpoint) -> record lines ignored by :meth:`read` because their key came earlier in the file.

        Counts are per (suite, endpoint) as seen by the reads made so far (a read filtered to one suite only
        counts that suite), so callers read what they score first, then ask.
        """
        with self._lock:
            return {k: v for k, v in self._read_duplicates.items() if v}

    def _lines(self) -> Iterator[tuple[int, bytes]]:
        if not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw.endswith(b"\n"):
                    return  # a torn last line (a kill mid-write): not a record; trimmed before the next append
                raw = raw.strip()
                if raw:
                    yield lineno, raw

    def _scan_keys(self) -> Iterator[tuple]:
        for lineno, raw in self._lines():
            try:
                d = json.loads(raw)
                yield tuple(d.get(f, 0 if f == "repeat" else None) for f in _KEY_FIELDS)
            except (ValueError, AttributeError):
                raise StoreError(f"{self.path}:{lineno}: not a valid record line") from None

    def _trim_torn_tail(self) -> int:
        """Cut a partial last line (a kill mid-write) so the file is whole lines again; returns bytes removed."""
        if not self.path.exists():
            return 0
        size = self.path.stat().st_size
        if size == 0:
            return 0
        with open(self.path, "rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return 0
            # find the last newline
            pos = size
            block = 4096
            keep = 0
            while pos > 0:
                start = max(0, pos - block)
                fh.seek(start)
                chunk = fh.read(pos - start)
                i = chunk.rfind(b"\n")
                if i >= 0:
                    keep = start + i + 1
                    break
                pos = start
            fh.truncate(keep)
        log.warning("%s: trimmed a torn last line (%d bytes) left by an interrupted run", self.path, size - keep)
        return size - keep


# ----------------------------------------------------------------------------------------------------------
# one writer per run folder
# ----------------------------------------------------------------------------------------------------------

LOCK_NAME = ".verifier.lock"


class RunFolderBusy(StoreError):
    """Another live process holds the run folder's lock; the message names it (pid, host, start time)."""


class RunFolderLock:
    """An exclusive ``flock`` on ``DIR/.verifier.lock``, held for the life of one ``verifier run``.

    Why a kernel lock and not a "lock file exists" marker: the kernel drops a ``flock`` when its holder dies, so
    a run killed with ``kill -9`` (exactly the case ``--resume`` exists for) never leaves a stale lock that a
    user would have to delete by hand. The file's content (pid, host, start time) only serves to name the
    holder in the second writer's error; it is never used to decide whether the folder is taken. ``flock``
    is advisory and per host (POSIX; not reliable on some network file systems): it keeps out another
    ``verifier run``, which is what two ``--resume DIR`` at once needed.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> RunFolderLock:
        """Take the lock or raise :class:`RunFolderBusy` (held) / :class:`StoreError` (folder not writable)."""
        try:
            import fcntl  # POSIX only; imported here so that reading a run folder never needs it
        except ImportError:  # e.g. Windows: run unlocked, say so; scoring still counts each key once
            log.warning("%s: not locked (no fcntl on this platform); run one writer at a time", self.run_dir)
            return self

        try:
            # no O_TRUNC: a second writer that fails to lock must still be able to read who holds it
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StoreError(f"{self.run_dir}: cannot write in the run folder ({e.strerror or e})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunFolderBusy(f"{self.run_dir}: another verifier run is writing this folder ({holder}); "
                                "wait for it to finish or stop it, then --resume") from None
        except OSError as e:
            os.close(fd)
            raise StoreError(f"{self.run_dir}: cannot lock the run folder ({e.strerror or e})") from None
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Empty the holder note and drop the lock (closing the descriptor drops the ``flock``)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)

    def __enter__(self) -> RunFolderLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    """'pid 123 on host, started 2026-...' from the lock file, or why it cannot be said."""
    try:
        raw = os.pread(fd, 4096, 0)
        info = json.loads(raw) if raw.strip() else None
    except (OSError, ValueError):
        info = None
    if not isinstance(info, dict):
        return "holder not recorded yet"
    return f"pid {info.get('pid', '?')} on {info.get('host', '?')}, started {info.get('started_at', '?')}"
def record_line(record: ExchangeRecord) -> bytes:
    """One record as one JSON line. Text with a lone UTF-16 surrogate (a provider's ``"\\ud83d"`` alone) cannot be
    UTF-8, so pydantic refuses it; such a record is written with ``\\uXXXX`` escapes (``ensure_ascii``), which JSON
    allows and :func:`parse_record_line` reads back to the very same string: lossless, and resume never trips on it."""
    try:
        return record.model_dump_json().encode() + b"\n"
    except ValueError:  # PydanticSerializationError: surrogates not allowed
        return json.dumps(record.model_dump(mode="json"), ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


def parse_record_line(raw: bytes) -> ExchangeRecord:
    """Inverse of :func:`record_line`; the fast pydantic path first, the stdlib one for escaped lone surrogates."""
    try:
        return ExchangeRecord.model_validate_json(raw)
    except ValueError:
        if b"\\ud" not in raw.lower():
            raise
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"not JSON: {e}") from None
    return ExchangeRecord.model_validate(data)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def display_json(model: BaseModel, *, indent: int | None = None) -> str:
    """JSON of a model shown to people (summary, report inputs). Records keep a lone surrogate losslessly (see
    :func:`record_line`); figures and excerpts derived from them show it as U+FFFD, because UTF-8 files, HTML and
    databases cannot hold it and one odd character must not cost the run its summary."""
    try:
        return model.model_dump_json(indent=indent)
    except ValueError:
        text = json.dumps(model.model_dump(mode="json"), ensure_ascii=False, indent=indent)
        return _LONE_SURROGATE.sub("\ufffd", text)


#: a first line longer than this (a provider's body pasted into an exception) is shortened at a sentence end
_MESSAGE_LIMIT = 1000


def _first_line(e: Exception) -> str:
    """The first line of an exception's message, for a one-line error or warning.

    Never cut mid-sentence: a cut once ended the warning that explained why a run was not indexed in the middle
    of its own explanation. A line over ``_MESSAGE_LIMIT`` characters (only pasted bodies get there) ends at its
    last sentence or clause end before the limit, followed by " (...)".
    """
    text = str(e).strip()
    return shorten_at_sentence(text.splitlines()[0]) if text else type(e).__name__


def shorten_at_sentence(line: str, limit: int = _MESSAGE_LIMIT) -> str:
    """``line`` unchanged when it fits; else cut after the last ". ", "; " or ": " before ``limit`` (or the last
    space, for text without one) and marked " (...)" so a reader knows there was more."""
    if len(line) <= limit:
        return line
    head = line[:limit]
    cut = max(head.rfind(". "), head.rfind("; "), head.rfind(": "))
    cut = cut + 1 if cut > 0 else (head.rfind(" ") if head.rfind(" ") > 0 else limit)
    return head[:cut].rstrip() + " (...)"


def new_run_id(run_dir: Path, started_at: dt.datetime | None = None) -> str:
    """A run id unique across folders, machines and clones: the folder's name, the UTC start and 6 random hex digits.

    Why not the folder's name alone: every nightly job that writes ``runs/default`` (or a second clone doing the
    same) had the same id, and the shared history refused all but the first. The name stays readable at the front;
    the manifest keeps the id, and ``--resume`` keeps it too.
    """
    started_at = started_at or dt.datetime.now(dt.UTC)
    stamp = started_at.strftime("%Y%m%dT%H%M%SZ")
    name = Path(run_dir).name or "run"
    head = name if name.startswith(stamp) else f"{name}-{stamp}"
    return f"{head}-{secrets.token_hex(3)}"


# ----------------------------------------------------------------------------------------------------------
# manifest.json
# ----------------------------------------------------------------------------------------------------------

class ManifestEndpoint(BaseModel):
    """An endpoint as the manifest keeps it: enough to resume, never a secret (header values redacted)."""

    name: str
    source: str  # what the user wrote: a URL or "builtin:tiny?kv=fp8"
    base_url: str
    model: str | None = None
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    rate: float | None = None
    concurrency: int = 8
    timeout: float = 120.0
    connect_timeout: float = 10.0
    write_timeout: float = 30.0
    read_timeout: float | None = None
    max_response_bytes: int = 8 * 1024 * 1024
    stream: bool = False
    max_attempts: int = 5
    is_reference: bool = False
    builtin: dict[str, Any] | None = None
    price: Price | None = None
    budget: float | None = None
    claims: StatedClaims | None = None  # kept so --resume checks the same statements


class ManifestSuite(BaseModel):
    ref: str  # what was passed to --suite (path or built-in name)
    kind: str
    manifest: SuiteManifest


class RunManifest(BaseModel):
    """``manifest.json``: what a run ran, against what, with which settings and software versions."""

    run_id: str
    started_at: str
    finished_at: str | None = None
    status: str = "running"  # running | completed | failed
    reference: str
    endpoints: list[ManifestEndpoint]
    suites: list[ManifestSuite]
    settings: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    resumed_at: list[str] = Field(default_factory=list)

    def write(self, run_dir: Path) -> None:
        """Atomic replace, so a kill never leaves a half-written manifest."""
        tmp = Path(run_dir) / "manifest.json.tmp"
        tmp.write_text(self.model_dump_json(indent=2))
        os.replace(tmp, Path(run_dir) / "manifest.json")

    @classmethod
    def load(cls, run_dir: Path) -> RunManifest:
        return read_json_model(cls, Path(run_dir) / "manifest.json", missing="no manifest.json; not a run folder",
                               unreadable="unreadable manifest", error=StoreError)
