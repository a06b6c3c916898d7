"""Task packs (everyday, airline, retail, all): `load_tasks(pack, split)` and demonstrations.

A task = a user query, the offered tools (gold tools plus 3-6 in all, distractors included), gold calls
(`step` orders sequences, equal steps are parallel) and key facts the final answer must state. Some tasks
need no tool (gold calls empty, `needs_tool=False`); abstention tasks (no offered tool can serve) set
`refusal`. Splits, the same for every run whatever its seed (`sim.tasks.generate.POOL_SEED`):
- `train`: what the warm start's demonstrations and the feed use;
- `test`: the same intents, phrasing templates and tools, other requests (no query or gold calls of a train task);
- `novel` (everyday only): intents, tools and phrasings that train and test never use (`sim.tasks.everyday_novel`);
- `all`: train + test (the novel split is asked for by name only: "all" stays what a feed may train on).
"""

from __future__ import annotations

import json
from pathlib import Path

from sim.tasks.demo import ademonstration, demonstration
from sim.tasks.generate import PACK_SOURCES, generate_pool
from slca.contracts import Task

PACKS = (*PACK_SOURCES, "all")
SPLITS = ("train", "test", "novel", "all")


def load_tasks(pack: str, split: str, seed: int = 0) -> list[Task]:
    """Tasks of a pack ('everyday', 'airline', 'retail', 'all') and split ('train', 'test', 'novel', 'all').

    `seed` is accepted for compatibility and changes neither the pool nor the split. 'novel' of a pack that has
    none (airline, retail) is a ValueError; of 'all', the novel tasks of the packs that have them."""
    if pack not in PACKS:
        raise ValueError(f"unknown task pack {pack!r}; known: {', '.join(PACKS)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    names = list(PACK_SOURCES) if pack == "all" else [pack]
    if split == "novel":
        names = [n for n in names if PACK_SOURCES[n].novel]
        if not names:
            raise ValueError(f"task pack {pack!r} has no novel split (only everyday has one)")
    tasks = [t for name in names for t in generate_pool(name, seed)]
    keep = ("train", "test") if split == "all" else (split,)
    return [t.model_copy(deep=True) for t in tasks if t.split in keep]


def write_jsonl(tasks: list[Task], path: str | Path) -> int:
    with open(path, "w", encoding="utf-8") as fh:
        for task in tasks:
            fh.write(task.model_dump_json() + "\n")
    return len(tasks)


def read_jsonl(path: str | Path) -> list[Task]:
    with open(path, encoding="utf-8") as fh:
        return [Task.model_validate(json.loads(line)) for line in fh if line.strip()]


__all__ = ["PACKS", "SPLITS", "ademonstration", "demonstration", "load_tasks", "read_jsonl", "write_jsonl"]
