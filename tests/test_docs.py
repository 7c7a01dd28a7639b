"""The user docs stand alone and say what the code does (issue 39, "Docs")."""

from __future__ import annotations

import re
from pathlib import Path

from verifier.run import registry

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", ROOT / "MODEL_CARD.md", *(ROOT / "docs").glob("*.md"),
               *(ROOT / "examples").glob("*.md"), *(ROOT / "suites").glob("*/README.md")])


def test_no_doc_points_outside_the_repository() -> None:
    """A relative link or a quoted path that leaves the repository (``../shared/DESIGN.md``) names a file a reader
    of a clone does not have."""
    outside = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)|`(\.\./[^`\s]+\.(?:md|py|json|toml|ya?ml))`", text):
            path = next(t for t in target if t)
            if "://" in path:
                continue
            resolved = (doc.parent / path).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                outside.append(f"{doc.relative_to(ROOT)}: {path}")
    assert outside == []


def test_cli_doc_states_the_real_suite_defaults_and_every_output() -> None:
    cli = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    row = next(line for line in cli.splitlines() if line.startswith("| `--suite S` |"))
    default = row.split("Default:", 1)[1]
    for name in [*registry.DEFAULT_SUITES, *registry.EMBEDDED_DEFAULT_SUITES]:
        assert f"`{name}`" in default, name
    for output in ("manifest.json", "records.jsonl", "summary.json", "report.html", "disclosure-<endpoint>.json",
                   "kl_exact/"):
        assert f"| `{output}" in cli, output
    merge = cli.split("## `verifier merge", 1)[1]
    assert "--db PATH|URL" in merge
