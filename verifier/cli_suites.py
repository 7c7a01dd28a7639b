"""``verifier suites ...``: list built-in suites, import BFCL question files.

The core CLI mounts this Typer ``app`` as the ``suites`` sub-command. Exit codes follow the run's
convention: 0 done, 2 usage or input error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from verifier.bfcl_import import convert_file, write_suite
from verifier.suite_format import SuiteLineError
from verifier.suite_registry import list_suites

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
    file: Path = typer.Argument(..., help="BFCL question file (JSON lines)"),
    out: Optional[Path] = typer.Option(None, "--out", help="output suite file (default: <file stem>.verifier.jsonl)"),
    answers: Optional[Path] = typer.Option(None, "--answers", help="BFCL possible-answer file for expected calls"),
    strict: bool = typer.Option(False, "--strict", help="stop at the first bad entry instead of skipping it"),
) -> None:
    """Convert a Berkeley Function Calling Leaderboard question file into a tool-call suite."""
    try:
        result = convert_file(file, answers=answers, strict=strict)
    except SuiteLineError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    for problem in result.problems:
        typer.echo(f"skipped: {problem}", err=True)
    if not result.lines:
        typer.echo(f"error: {file}: no convertible entries", err=True)
        raise typer.Exit(2)
    target = out or file.with_name(file.stem + ".verifier.jsonl")
    write_suite(result, target)
    typer.echo(f"wrote {target}: {len(result.lines)} cases ({result.with_expected} with expected answers, "
               f"{len(result.problems)} skipped)")
