"""The house rules of docs/design.md#components, read from the code's own imports (module- and function-level):

- `serve`, `sim`, `workers`, `learner` import only `slca` (and themselves); serve may reach `sim` only in its
  tool-protocol module(s), named below;
- `ops` is the one package that composes components (it may import any of them);
- `slca` names no component: it imports none, and holds no "component.module" string to import one by name
  (components plug in through entry points, `pyproject.toml`);
- outside the packages only `tests/` imports project code: every Python file of the repository is read, and a script
  elsewhere (bench/ holds results only; a bench's code lives in `ops/bench/<family>/`) is reported.
"""

from __future__ import annotations

import ast
import re

from tests.support.imports import PACKAGES, REPO, parse, python_files

COMPONENTS = ("serve", "sim", "workers", "learner", "ops")
ALLOWED: dict[str, set[str]] = {
    "serve": {"slca"},
    "sim": {"slca"},
    "workers": {"slca"},
    "learner": {"slca"},
    "ops": {"slca", "serve", "sim", "workers", "learner"},
    "slca": set(),
    "tests": set(PACKAGES),
}
"""Who may import whom, by the top folder a file stands in; a file in any other folder may import no project code."""
TOOL_PROTOCOL_MODULES = {"serve/tools.py"}
"""Where serve calls sim (`sim.make_provider`, the `ToolProvider` protocol of `slca.contracts`)."""
_MODULE_STRING = re.compile(rf"^({'|'.join(COMPONENTS)})(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?$")


def _sources(folder: str | None = None):
    """(path, tree) of every Python file of the repository, or of those under `folder`."""
    for rel in python_files():
        if folder is None or rel.split("/")[0] == folder:
            yield rel, parse(rel)


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


def file_violations(rel: str, tree: ast.AST) -> list[str]:
    """What `rel` imports that the house rules forbid to the folder it stands in."""
    folder = rel.split("/")[0] if "/" in rel else ""
    out = []
    for line, module in _imports(tree):
        top = module.split(".")[0]
        if top not in PACKAGES or top == folder or top in ALLOWED.get(folder, ()):
            continue
        if folder == "serve" and top == "sim" and rel in TOOL_PROTOCOL_MODULES:
            continue
        if folder in ALLOWED:
            out.append(f"{rel}:{line}: {folder} imports {module}")
        else:
            where = f"{folder}/" if folder else "the repository root"
            out.append(f"{rel}:{line}: {where} is no package and imports {module}")
    return out


def import_violations() -> list[str]:
    return [v for rel, tree in _sources() for v in file_violations(rel, tree)]


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


def test_every_python_file_is_read():
    """Not only the packages: bench/, scripts/, tests/ and the root too (the checker once read the packages only)."""
    read = {rel for rel, _ in _sources()}
    assert {"tests/test_layering.py", "tests/support/imports.py", "ops/cli.py"} <= read


def test_bench_holds_results_only():
    """A bench's code lives in ops/bench/<family>/ (`python -m ops.bench.<family>.<name>` or `slca bench …`)."""
    scripts = [rel for rel in python_files() if rel.startswith("bench/")]
    assert not scripts, f"Python files in bench/ (move them to ops/bench/<family>/): {scripts}"


def test_a_file_outside_the_packages_may_not_import_project_code():
    tree = ast.parse("import json\ndef main():\n    from ops.bench.ab import alternate\n")
    assert file_violations("bench/serve/probe.py", tree) == [
        "bench/serve/probe.py:3: bench/ is no package and imports ops.bench.ab"
    ]
    assert file_violations("scripts/x.py", ast.parse("import serve.app")) == [
        "scripts/x.py:1: scripts/ is no package and imports serve.app"
    ]
    assert file_violations("setup.py", ast.parse("import slca")) == [
        "setup.py:1: the repository root is no package and imports slca"
    ]
    assert file_violations("tests/serve/test_x.py", ast.parse("import ops.cli\nimport serve.app")) == []
    assert file_violations("learner/x.py", ast.parse("import serve.app")) == [
        "learner/x.py:1: learner imports serve.app"
    ]


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
