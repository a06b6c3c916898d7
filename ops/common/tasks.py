"""Where the feed's tasks come from: the sim component's packs, else the built-in fallback pack."""

from __future__ import annotations

import logging

from slca.contracts import Task

log = logging.getLogger("slca.feed")


def load_pack(pack: str, split: str, seed: int = 0) -> list[Task]:
    try:
        from sim.tasks import load_tasks
    except ImportError:
        from ops.common.builtin_tasks import builtin_tasks

        log.warning("sim.tasks is not available: using the built-in %s pack (%s)", split, "ops/common/builtin_tasks.py")
        return builtin_tasks(split)
    tasks = load_tasks(pack, split, seed=seed)
    if not tasks:
        raise ValueError(f"task pack {pack!r} has no {split} tasks")
    return tasks
