"""No import runs in a circle (docs/design.md#components), read from the code's own imports, module level and inside
functions alike (a lazy import is still an import):

- no two project modules import each other, directly or round a longer circle;
- the ops rooms stack in floors: a module imports only from its own room or from a floor below, never from a room
  beside it or above it. What two rooms share goes one floor down (`ops/common/`).
"""

from __future__ import annotations

import ast

from tests.support.imports import cycles, import_graph, imported_names, resolve

OPS_FLOORS: tuple[tuple[str, ...], ...] = (
    ("ops.common", "ops.settings"),  # what every room shares: its settings, the task packs, the machine, up's state
    ("ops.experiments",),  # training, the warm start, evaluation (the probe's plan included)
    ("ops.observe",),  # reading what the system does: Redis views, scrapes, the probe's rounds, dashboards
    ("ops.run",),  # slca up, the feed, the gate, slca status: composes experiments and observe
    ("ops.bench",),  # the benches: measure any of the above
    ("ops", "ops.cli", "ops.mounts"),  # the commands' registration and the dashboard's mount
)
"""Lowest first. A room is the longest prefix of a module's name listed here."""


def room_of(module: str) -> str:
    rooms = [room for floor in OPS_FLOORS for room in floor if module == room or module.startswith(room + ".")]
    return max(rooms, key=len)


def floor_of(room: str) -> int:
    return next(i for i, floor in enumerate(OPS_FLOORS) if room in floor)


def floor_violations(graph: dict[str, dict[str, int]]) -> list[str]:
    out = []
    for module, edges in sorted(graph.items()):
        if module.split(".")[0] != "ops":
            continue
        here = room_of(module)
        for target, line in sorted(edges.items()):
            if target.split(".")[0] != "ops" or room_of(target) == here:
                continue
            there = room_of(target)
            if floor_of(there) >= floor_of(here):
                side = "beside" if floor_of(there) == floor_of(here) else "above"
                out.append(f"{module}:{line}: {here} imports {target} ({there}, a room {side} it)")
    return out


def test_no_module_imports_one_that_imports_it_back():
    found = cycles(import_graph())
    assert not found, "import circles (move what both need into a module below them):\n" + "\n".join(
        " ↔ ".join(c) for c in found
    )


def test_the_ops_rooms_import_only_from_below():
    violations = floor_violations(import_graph())
    assert not violations, "ops imports that run back up (tests/test_import_cycles.py OPS_FLOORS):\n" + "\n".join(
        violations
    )


def test_every_ops_module_stands_on_a_floor():
    """A new room must be placed in OPS_FLOORS, not fall silently into the top floor's `ops`."""
    unplaced = [m for m in import_graph() if m.split(".")[0] == "ops" and room_of(m) == "ops" and m != "ops"]
    assert not unplaced, f"ops modules in no room of OPS_FLOORS: {unplaced}"


def test_the_checker_finds_circles_and_function_level_imports():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    tree = ast.parse("def f():\n    from ops.run.feed.main import make_plan\n    from . import probe\n")
    names = [name for _, name in imported_names(tree, "ops.observe.online")]
    assert names == ["ops.run.feed.main.make_plan", "ops.observe.probe"]
    assert resolve(names[0], {"ops.run.feed.main", "ops.run.feed"}) == "ops.run.feed.main"


def test_a_room_importing_one_beside_or_above_it_is_reported():
    graph = {
        "ops.observe.online": {"ops.run.supervisor.up": 3, "ops.common.up_state": 4, "ops.experiments.eval.suite": 5},
        "ops.experiments.eval.suite": {"ops.observe.redis_view": 7},
        "ops.run.status": {"ops.observe.redis_view": 9, "ops.run.feed.main": 10},
        "ops.common.tasks": {"ops.settings": 2},
    }
    assert floor_violations(graph) == [
        "ops.common.tasks:2: ops.common imports ops.settings (ops.settings, a room beside it)",
        "ops.experiments.eval.suite:7: ops.experiments imports ops.observe.redis_view (ops.observe, a room above it)",
        "ops.observe.online:3: ops.observe imports ops.run.supervisor.up (ops.run, a room above it)",
    ]
