"""``suites/`` holds data and environments only: no module under it imports ``verifier`` (or ``training``).

Why: ``verifier`` reads the suites, so a suite module importing ``verifier`` back makes a circle, and a
suite that needs product code to load is no longer data. Imports are read with ``ast`` (not by importing,
which would hide an import inside a function or a branch that did not run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SUITES = Path(__file__).resolve().parents[2] / "suites"
FORBIDDEN = ("verifier", "training", "reports", "reference_engine")


def imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement anywhere in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return sorted(found)


def forbidden_imports(path: Path) -> list[str]:
    return [f"{path}:{line}: imports {name}" for line, name in imported_modules(path.read_text(encoding="utf-8"))
            if name.split(".")[0] in FORBIDDEN]


def test_the_check_sees_imports_in_every_form() -> None:
    source = ("import verifier.cli\nfrom verifier.kinds.toolcall.suite_format import case_to_line\n"
              "def f():\n    import training.corpus as c\nfrom . import catalog\nimport json\n")
    assert imported_modules(source) == [(1, "verifier.cli"), (2, "verifier.kinds.toolcall.suite_format"),
                                        (4, "training.corpus"),
                                        (6, "json")]


@pytest.mark.parametrize("path", sorted(SUITES.rglob("*.py")), ids=lambda p: str(p.relative_to(SUITES)))
def test_no_suites_module_imports_product_or_training_code(path: Path) -> None:
    assert forbidden_imports(path) == []


def test_the_suites_tree_has_modules_to_check() -> None:
    assert len(list(SUITES.rglob("*.py"))) >= 10
