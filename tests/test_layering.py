"""The house rules of docs/design.md#components, read from the code's own imports (module- and function-level):

- `serve`, `sim`, `workers`, `learner` import only `slca` (and themselves); serve may reach `sim` only in its
  tool-protocol module(s), named below;
- `ops` is the one package that composes components (it may import any of them);
- `slca` names no component: it imports none, and holds no "component.module" string to import one by name
  (components plug in through entry points, `pyproject.toml`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMPONENTS = ("serve", "sim", "workers", "learner", "ops")
PACKAGES = (*COMPONENTS, "slca")
ALLOWED: dict[str, set[str]] = {
    "serve": {"slca"},
    "sim": {"slca"},
    "workers": {"slca"},
    "learner": {"slca"},
    "ops": {"slca", "serve", "sim", "workers", "learner"},
    "slca": set(),
}
TOOL_PROTOCOL_MODULES = {"serve/tools.py"}
"""Where serve calls sim (`sim.make_provider`, the `ToolProvider` protocol of `slca.contracts`)."""
_MODULE_STRING = re.compile(rf"^({'|'.join(COMPONENTS)})(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?$")


def _sources(package: str):
    for path in sorted((REPO / package).rglob("*.py")):
        yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _imports(tree: ast.AST):
    """(line, imported module) of every absolute import, wherever it stands (module level or in a function)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return {id(n.body[0].value) for n in nodes if n.body and isinstance(n.body[0], ast.Expr)}


def import_violations() -> list[str]:
    out = []
    for package in PACKAGES:
        for rel, tree in _sources(package):
            for line, module in _imports(tree):
                top = module.split(".")[0]
                if top not in PACKAGES or top == package or top in ALLOWED[package]:
                    continue
                if package == "serve" and top == "sim" and rel in TOOL_PROTOCOL_MODULES:
                    continue
                out.append(f"{rel}:{line}: {package} imports {module}")
    return out


def named_component_violations() -> list[str]:
    out = []
    for rel, tree in _sources("slca"):
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                if _MODULE_STRING.match(node.value.strip()):
                    out.append(f"{rel}:{node.lineno}: slca names component module {node.value!r}")
    return out


def test_components_import_only_what_the_layering_allows():
    violations = import_violations()
    assert not violations, "imports that break docs/design.md#components:\n" + "\n".join(violations)


def test_slca_names_no_component():
    violations = named_component_violations()
    assert not violations, "slca/ must plug components in through entry points:\n" + "\n".join(violations)


def test_the_tool_protocol_modules_exist():
    """A renamed tool-protocol module must be renamed here too, not silently allowed nowhere."""
    assert all((REPO / rel).is_file() for rel in TOOL_PROTOCOL_MODULES)


def test_the_checker_sees_function_level_imports(tmp_path):
    tree = ast.parse("def f():\n    from ops.observe.dashboard import make_app\n    import workers.scoring\n")
    assert [m for _, m in _imports(tree)] == ["ops.observe.dashboard", "workers.scoring"]
    assert _MODULE_STRING.match("serve.settings:ServeSettings") and not _MODULE_STRING.match("served by sim")
