"""The repository's imports read from its source with `ast` (module level and inside functions alike), for the
house-rule tests: `tests/test_layering.py` (who may import whom) and `tests/test_import_cycles.py` (no circle, and
the ops rooms' floors)."""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.processes import REPO

PACKAGES = ("serve", "sim", "workers", "learner", "ops", "slca")
"""The project's packages: what 'project code' is."""


def python_files(repo: Path = REPO) -> list[str]:
    """Every Python file of the repository (tracked, or new and not ignored), as paths relative to it. Outside a git
    checkout: every `.py` file below `repo` but in hidden folders and `.venv`."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.py"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        return sorted(rel for rel in listed if (repo / rel).is_file())  # a file deleted but not yet staged
    except (OSError, subprocess.CalledProcessError):
        skip = lambda rel: any(part.startswith(".") for part in rel.parts)  # noqa: E731  .venv, .git
        return sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*.py") if not skip(p.relative_to(repo)))


def parse(rel: str, repo: Path = REPO) -> ast.AST:
    path = repo / rel
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def module_name(rel: str) -> str:
    """`ops/run/status.py` → `ops.run.status`; a package's `__init__.py` → the package."""
    parts = rel.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree: ast.AST, module: str = "", is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import, wherever it stands. `from a.b import c` gives `a.b.c` (a module or a
    name in `a.b`: `resolve` tells which); a relative import is made absolute against `module`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}" if base else alias.name


def resolve(name: str, modules: set[str]) -> str | None:
    """The most specific project module `name` names (`ops.run.status.main` → `ops.run.status`), or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def project_modules(repo: Path = REPO) -> dict[str, str]:
    """Module name → file, for every module of the project's packages."""
    return {module_name(rel): rel for rel in python_files(repo) if rel.split("/")[0] in PACKAGES}


def import_graph(repo: Path = REPO) -> dict[str, dict[str, int]]:
    """module → {project module it imports: the first line that does}. An import of a package's `__init__` for a
    name it re-exports counts as importing the package (its `__init__`), not the module the name comes from."""
    modules = project_modules(repo)
    names = set(modules)
    graph: dict[str, dict[str, int]] = {}
    for module, rel in modules.items():
        edges = graph.setdefault(module, {})
        for line, name in imported_names(parse(rel, repo), module, rel.endswith("__init__.py")):
            target = resolve(name, names)
            if target is not None and target != module:
                edges.setdefault(target, line)
    return graph


def cycles(graph: dict[str, dict[str, int]] | dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative): each is a set of
    modules that import one another round a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, ()))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found
