"""The import graph of the product packages: no circles, nothing imports upward (docs/CONTRACTS.md, "Layout and
layering").

Imports are read with ``ast`` from the source, every ``import`` statement anywhere in a file (a lazy import inside
a function is still a dependency), so the test needs nothing imported and sees what a reader sees.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("verifier", "reports", "suites")

#: importer prefix -> prefixes it must never import (the stages below must not know the stages above them).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "suites": ("verifier", "reports"),
    "reports": ("verifier.cli", "verifier.run.runner", "verifier.run.registry", "verifier.run.merge",
                "verifier.run.calibrate", "verifier.kinds"),
    "verifier.records": ("verifier", "reports"),
    "verifier.stats": ("verifier.run", "verifier.http", "verifier.kinds", "verifier.history", "verifier.cli",
                       "reports"),
    "verifier.http": ("verifier.cli", "verifier.run.runner", "verifier.run.registry", "verifier.kinds",
                      "verifier.history", "reports"),
    "verifier.run": ("verifier.cli", "reports", "verifier.history"),
    "verifier.kinds": ("verifier.cli", "reports", "verifier.history", "verifier.run.runner", "verifier.run.registry",
                       "verifier.run.merge", "verifier.run.calibrate"),
    "verifier.history": ("verifier.cli", "reports", "verifier.kinds", "verifier.run.runner",
                         "verifier.run.registry", "verifier.run.merge"),
    "verifier.testing": ("verifier.cli", "reports", "verifier.run.runner"),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            out[_module_name(path)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The longest prefix of ``name`` that is one of our modules (``a.b.c`` where ``c`` is a function -> ``a.b``)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path) -> set[str]:
    """Every module of ours that ``module`` imports, by absolute or relative import, anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                found.add(target)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _is_under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_the_graph_covers_the_packages() -> None:
    """A guard for the test itself: it reads real modules and real edges."""
    assert "verifier.run.runner" in MODULES and "verifier.kinds.toolcall.kind" in MODULES
    assert "verifier.run.protocol" in GRAPH["verifier.kinds.toolcall.kind"]
    assert "verifier.run.runner" in GRAPH["verifier.cli.compose"]


@pytest.mark.parametrize("importer", sorted(FORBIDDEN))
def test_nothing_imports_upward(importer: str) -> None:
    bad = [f"{m} imports {t}" for m, targets in GRAPH.items() if _is_under(m, importer)
           for t in sorted(targets) for f in FORBIDDEN[importer] if _is_under(t, f) and not _is_under(m, f)]
    assert not bad, "\n".join(bad)


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components over module edges: every component must be one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the module count (~100)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)
