"""``verifier suites ...``: list built-in suites, import BFCL question files.

The core CLI mounts this Typer ``app`` as the ``suites`` sub-command. Exit codes follow the run's
convention: 0 done, 2 usage or input error.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from verifier.kinds.toolcall.bfcl.importer import (
    BfclFileError,
    FuncDocs,
    ImportResult,
    convert_file,
    default_answers,
    default_func_docs,
    write_suite,
)
from verifier.kinds.toolcall.suite_format import SuiteLineError
from verifier.run.registry import list_suites

app = typer.Typer(help="Suites: list the built-in ones, import others.", no_args_is_help=True)
import_app = typer.Typer(help="Convert other benchmarks' files into verifier suites.", no_args_is_help=True)
app.add_typer(import_app, name="import")


@app.command("list")
def list_cmd(as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table")) -> None:
    """Built-in suites with kind, version, case count and content hash."""
    rows = list_suites()
    if as_json:
        typer.echo(json.dumps([r.model_dump() for r in rows], indent=2))
        return
    table = Table("name", "kind", "version", "cases", "content hash", "notes")
    table.columns[0].no_wrap = True
    for r in rows:
        table.add_row(r.name, r.kind, r.version or "-", "-" if r.cases is None else str(r.cases),
                      (r.content_hash or "-")[:12], r.error or r.description)
    Console(width=max(120, Console().width)).print(table)


@import_app.command("bfcl")
def import_bfcl(
    files: list[Path] = typer.Argument(..., help="BFCL question file(s) (JSON lines), e.g. BFCL_v4_simple_python.json"),
    out: Path | None = typer.Option(None, "--out", help="output suite file for one FILE, a folder for several "
                                       "(default: <file stem>.verifier.jsonl beside each file)"),
    answers: Path | None = typer.Option(None, "--answers", help="possible-answer file for one FILE, or a folder "
                                           "of them by the same names (default: possible_answer/<name> beside FILE)"),
    func_docs: Path | None = typer.Option(None, "--func-docs", help="BFCL's multi_turn_func_doc/ folder, for "
                                             "multi-turn, memory and web_search files (default: beside FILE)"),
    strict: bool = typer.Option(False, "--strict", help="stop at the first bad entry instead of skipping it"),
) -> None:
    """Convert Berkeley Function Calling Leaderboard question files into tool-call suites.

    Prints one summary table at the end: entries per file, cases imported, those with an expected
    answer, entries skipped with their reasons, and expected answers that fail their own converted schema.
    """
    results: list[ImportResult] = []
    try:
        if out is not None and len(files) > 1 and out.suffix == ".jsonl":
            raise BfclFileError(f"{out}: --out must be a folder when several files are imported")
        for f in files:
            if not f.is_file():
                raise BfclFileError(f"{f}: BFCL question file not found")
        docs_cache: dict[Path, FuncDocs] = {}
        for f in files:
            ans = _answers_for(f, answers, several=len(files) > 1)
            docs_dir = func_docs if func_docs is not None else default_func_docs(f)
            docs = None
            if docs_dir is not None:
                docs = docs_cache.setdefault(docs_dir, FuncDocs(docs_dir))
            results.append(convert_file(f, answers=ans, func_docs=docs, strict=strict))
    except (BfclFileError, SuiteLineError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    for r in results:
        for problem in r.problems:
            typer.echo(f"skipped: {problem}", err=True)
    written = []
    for r in results:
        if not r.lines:
            continue
        src = Path(r.source)
        target = (out if out is not None and len(files) == 1 else
                  (out / (src.stem + ".verifier.jsonl")) if out is not None else src.with_name(src.stem
                                                                                               + ".verifier.jsonl"))
        written.append(write_suite(r, target))
    _print_summary(results)
    if not written:
        typer.echo("error: no convertible entries in " + ", ".join(str(f) for f in files), err=True)
        raise typer.Exit(2)
    for target, r in zip(written, [r for r in results if r.lines]):
        typer.echo(f"wrote {target}: {len(r.lines)} cases ({r.with_expected} with expected answers, "
                   f"{sum(r.skipped.values())} entries skipped)")


def _answers_for(question_file: Path, answers: Path | None, several: bool) -> Path | None:
    """The possible-answer file for one question file: given, in a given folder, or BFCL's own layout."""
    if answers is None:
        return default_answers(question_file)
    if answers.is_dir():
        candidate = answers / question_file.name
        return candidate if candidate.is_file() else None
    if several:
        raise BfclFileError(f"{answers}: --answers must be a folder when several files are imported")
    return answers


def _print_summary(results: list[ImportResult]) -> None:
    """One table for every file: what came in, what went out, what was left out and why."""
    table = Table("file", "entries", "cases imported", "with expected", "skipped (reason: entries)",
                  "answers failing their schema", title="BFCL import")
    for r in results:
        skipped = "; ".join(f"{reason}: {n}" for reason, n in r.skipped.most_common()) or "-"
        causes = r.failures_by_cause()
        failing = str(len(r.schema_failures)) + (
            " (" + ", ".join(f"{c}: {n}" for c, n in causes.most_common()) + ")" if causes else "")
        table.add_row(Path(r.source).name, str(r.entries), str(r.imported), str(r.with_expected), skipped, failing)
    if len(results) > 1:
        tot = ImportResult(source="total")
        for r in results:
            tot.entries += r.entries
            tot.lines += r.lines
            tot.with_expected += r.with_expected
            tot.skipped.update(r.skipped)
            tot.schema_failures += r.schema_failures
        table.add_row("total", str(tot.entries), str(tot.imported), str(tot.with_expected),
                      str(sum(tot.skipped.values())), str(len(tot.schema_failures)))
    console = Console(width=max(160, Console().width))
    console.print(table)
    for r in results:
        for reason, n in r.skipped.most_common():
            console.print(f"skipped {n} entries of {Path(r.source).name}: {reason}", markup=False)
    notes = Counter[str]()
    later = 0
    for r in results:
        notes.update(r.no_expected)
        later += r.later_turns
    for reason, n in notes.most_common():
        console.print(f"imported without expected answer: {n} cases: {reason}", markup=False)
    if later:
        console.print(f"not imported: {later} later turns of multi-turn entries (each needs the model's own earlier "
                      "replies and executed tool results)", markup=False)
    for r in results:
        for failure in r.schema_failures:
            console.print(f"answer failing its schema: {Path(r.source).name}: {failure}", markup=False)
