"""No function of the packages is longer than `BOUND` lines, but those `ALLOWED` names and says why (issue 39 item 4:
when the formatter unrolled literal tables one element per line, functions over 60 lines went from 2 to 19; a table
is data at module level — `slca.cli.flags` for flag lists — that a short function iterates). Read with `ast`, so
nested functions count on their own and inside their parent."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("serve", "learner", "sim", "workers", "ops", "slca")
BOUND = 80
"""Lines from `def` to the last line of the body (STYLE.md asks for ~60; the bound leaves room, not a target)."""

ALLOWED = {
    # a list of intents whose samplers and gold calls close over the domain database loaded at call time: the
    # rows are data already, each a few lambdas; a module-level table would need the database at import
    "sim/tasks/tau2.py:airline_intents": "intents closing over the airline database",
    "sim/tasks/tau2.py:retail_intents": "intents closing over the retail database",
    # real logic, each a plan in steps; splitting them is a refactor of its own (left for the rooms' owners)
    "ops/experiments/train/controlled.py:run_train_cli": "`slca train`: set-up, the generate/train/publish loop, "
    "its log line",
    "ops/bench/rl/main.py:run_rl_bench": "`slca bench rl`: checks, both sides' specs, the run, its outputs",
    "ops/bench/rl/main.py:run_alternated": "the alternated TRL/slca windows, resumable, and their report",
    "ops/bench/rl/trl_side.py:run": "TRL's side: dataset, GRPOConfig, trainer and the timed window",
}
"""`path:qualified name` → why it stays longer than `BOUND`."""


def functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method of a module, with its qualified name (`Class.method`, `outer.inner`)."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield prefix + child.name, child
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


@functools.cache  # parsed once for the tests that read it
def lengths() -> dict[str, int]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for name, node in functions(tree):
                out[f"{path.relative_to(ROOT).as_posix()}:{name}"] = node.end_lineno - node.lineno + 1
    return out


def test_no_function_is_longer_than_the_bound_but_the_allowed():
    too_long = {name: n for name, n in lengths().items() if n > BOUND and name not in ALLOWED}
    assert not too_long, (
        f"functions over {BOUND} lines: {too_long}; move a literal table to module-level data "
        "(slca.cli.flags for flags) or split the logic into named helpers"
    )


def test_every_allowed_function_exists_and_is_still_long():
    # an entry that no longer needs its place leaves the list, so the list says what is left to do
    found = lengths()
    stale = {name: found.get(name) for name in ALLOWED if found.get(name, 0) <= BOUND}
    assert not stale, f"no longer over {BOUND} lines (or gone): remove from ALLOWED: {stale}"


def test_functions_finds_methods_and_nested_functions_by_qualified_name():
    tree = ast.parse("class A:\n    def m(self):\n        def inner():\n            pass\n\nasync def f():\n    pass\n")
    assert [name for name, _ in functions(tree)] == ["A.m", "A.m.inner", "f"]
