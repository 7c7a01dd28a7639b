"""Write the built-in tool-call suites from the catalogue: ``python -m suites.toolcall.generate [--check]``.

The data files are committed so a result names exactly what it ran (by content hash) even if the
catalogue changes later; ``--check`` regenerates in memory and fails when the committed files differ,
so nobody edits the data by hand or forgets to regenerate after a catalogue change.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from suites.toolcall.catalog import generate_cases, generate_forced_cases

DATA_DIR = Path(__file__).resolve().parent / "data"
CORE_SEED = 20260101
SCHEMAS_SEED = 20260102
CORE_CASES = 1200
CORE_NO_TOOL_SHARE = 0.3
SCHEMAS_PER_TOOL = 3


def case_to_line(body: dict[str, Any], meta: dict[str, Any]) -> str:
    """One suite line: compact JSON, ``_meta`` last (the suite format ``verifier.kinds.toolcall.suite_format`` reads).

    Why not ``verifier.kinds.toolcall.suite_format.case_to_line``: ``suites/`` holds data and does not import
    ``verifier``;
    ``tests/suites/test_suites_catalog.py`` checks both write the same bytes."""
    return json.dumps({**body, "_meta": meta}, ensure_ascii=False, separators=(",", ":"))


def build() -> dict[str, str]:
    """File name -> full text of each built-in suite file (eval phrasings only)."""
    core = generate_cases(CORE_SEED, CORE_CASES, no_tool_share=CORE_NO_TOOL_SHARE, id_prefix="core")
    schemas = generate_forced_cases(SCHEMAS_SEED, SCHEMAS_PER_TOOL, id_prefix="schemas")
    return {
        "toolcall-core.jsonl": "".join(case_to_line(b, m) + "\n" for b, m in core),
        "toolcall-schemas.jsonl": "".join(case_to_line(b, m) + "\n" for b, m in schemas),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DATA_DIR, help="folder to write (default: the package data folder)")
    ap.add_argument("--check", action="store_true", help="only verify the committed files are up to date")
    args = ap.parse_args(argv)
    files = build()
    if args.check:
        stale = [n for n, text in files.items()
                 if not (args.out / n).is_file() or (args.out / n).read_text(encoding="utf-8") != text]
        for n in stale:
            print(f"{args.out / n}: out of date; run python -m suites.toolcall.generate", file=sys.stderr)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for n, text in files.items():
        (args.out / n).write_text(text, encoding="utf-8")
        print(f"wrote {args.out / n} ({text.count(chr(10))} cases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
