"""Task packs (everyday, airline, retail, all): `load_tasks(pack, split, seed)` and demonstrations.

A task = a user query, the offered tools (gold tools plus 3-6 in all, distractors included), gold calls
(`step` orders sequences, equal steps are parallel) and key facts the final answer must state. Some tasks
need no tool (gold calls empty, `needs_tool=False`). Splits are fixed by the seed.
"""

from __future__ import annotations

import json
from pathlib import Path

from sim.tasks.demo import ademonstration, demonstration
from sim.tasks.generate import PACK_SOURCES, generate_pool
from slca.contracts import Task

PACKS = (*PACK_SOURCES, "all")
SPLITS = ("train", "test", "all")


def load_tasks(pack: str, split: str, seed: int = 0) -> list[Task]:
    """Tasks of a pack ('everyday', 'airline', 'retail', 'all') and split ('train', 'test', 'all')."""
    if pack not in PACKS:
        raise ValueError(f"unknown task pack {pack!r}; known: {', '.join(PACKS)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    names = list(PACK_SOURCES) if pack == "all" else [pack]
    tasks = [t for name in names for t in generate_pool(name, seed)]
    return [t.model_copy(deep=True) for t in tasks if split == "all" or t.split == split]


def write_jsonl(tasks: list[Task], path: str | Path) -> int:
    with open(path, "w", encoding="utf-8") as fh:
        for task in tasks:
            fh.write(task.model_dump_json() + "\n")
    return len(tasks)


def read_jsonl(path: str | Path) -> list[Task]:
    with open(path, encoding="utf-8") as fh:
        return [Task.model_validate(json.loads(line)) for line in fh if line.strip()]


__all__ = ["PACKS", "SPLITS", "ademonstration", "demonstration", "load_tasks", "read_jsonl", "write_jsonl"]
