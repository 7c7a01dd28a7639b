"""File names built from suite or endpoint text, kept inside the run folder.

Why this exists: case ids, suite names and endpoint names come from files and flags a user (or a suite author they
trust too much) wrote. A logprob case id of ``../../etc/x`` or ``/tmp/x`` once became ``kl_exact/{id}.npz`` and
wrote wherever the process could. Every path built from such text goes through :func:`inside_run`, which encodes
each piece as one harmless file-name component and then checks that the resolved path is still inside the run
folder (a symlink planted in the folder cannot lead out either).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import quote

__all__ = ["OutsideRunFolder", "inside_run", "safe_component"]

#: longest encoded component kept verbatim; longer ones are cut and get a hash suffix (file systems allow 255 bytes)
_MAX_COMPONENT = 120


class OutsideRunFolder(ValueError):
    """A path built from data resolved outside the run folder (only possible through a planted symlink)."""


def safe_component(text: str) -> str:
    """``text`` as exactly one file-name component: percent-encoded (so ``/``, ``\\``, ``:``, NUL and control
    characters cannot act), never ``.``/``..``/empty/hidden, at most ~140 characters.

    Percent-encoding is one-to-one, so two different ids never share a file; a cut (very long) name keeps that
    property through a SHA-256 suffix of the whole text. Plain ids (``case-001``) stay as they are.
    """
    encoded = quote(text, safe="-_~.+=@,") or "%00empty"
    if encoded.startswith("."):  # ".", "..", and hidden files
        encoded = "%2E" + encoded[1:]
    if len(encoded) > _MAX_COMPONENT:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        encoded = f"{encoded[:_MAX_COMPONENT]}~{digest}"
    return encoded


def inside_run(run_dir: Path, *parts: str, suffix: str = "") -> Path:
    """``run_dir / part1 / part2 ... + suffix`` with every part from data made safe; raises
    :class:`OutsideRunFolder` if the result still resolves outside ``run_dir``.

    Pass fixed folder names (``"kl_exact"``) as parts too: they are plain and stay unchanged.
    """
    root = Path(run_dir).resolve()
    comps = [safe_component(p) for p in parts]
    if suffix and comps:
        comps[-1] += suffix
    path = root.joinpath(*comps)
    if not path.resolve().is_relative_to(root):
        raise OutsideRunFolder(f"{path}: leaves the run folder {root}")
    return path
