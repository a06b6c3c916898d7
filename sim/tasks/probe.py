"""The training-task probe: a fixed sample of the `train` split, stratified over intents.

A learning claim starts with the tasks the learner trains on: if an update does not raise success on those,
it will not raise it held out. The probe is drawn once, with its own seed (never the run's), so every run,
version and evaluation judges the same items; the feed serves these tasks too (they are training tasks).

Stratified: the `n` items are spread over the intents as evenly as the intents' sizes allow (round-robin over
intents in a seeded order, each intent's tasks in a seeded order), so a small probe still sees every intent.
"""

from __future__ import annotations

import random

from slca.contracts import Task

PROBE_SEED = 35
"""The probe's own draw (not a run's seed): changing it changes which items every report compares."""

DEFAULT_PROBE_SIZE = 64


def training_probe(pack: str = "everyday", n: int = DEFAULT_PROBE_SIZE) -> list[Task]:
    """`n` tasks of `pack`'s train split, stratified over intents, in a fixed order (the same on every call)."""
    from sim.tasks import load_tasks

    if n < 1:
        raise ValueError(f"training probe size must be >= 1, got {n}")
    return stratified(load_tasks(pack, "train"), n, PROBE_SEED)


def stratified(tasks, n: int, seed: int) -> list[Task]:
    """`n` of `tasks` spread over their intents: round-robin over the intents in a seeded order, each intent's tasks
    in a seeded order (the training probe's and the gate set's draw)."""
    from sim.tasks.generate import base_intent

    rng = random.Random(seed)
    by_intent: dict[str, list[Task]] = {}
    for task in sorted(tasks, key=lambda t: t.task_id):
        by_intent.setdefault(base_intent(task), []).append(task)
    queues = []
    for intent in sorted(by_intent):
        rng.shuffle(by_intent[intent])
        queues.append(by_intent[intent])
    rng.shuffle(queues)
    picked: list[Task] = []
    while len(picked) < n and any(queues):
        for queue in queues:
            if queue and len(picked) < n:
                picked.append(queue.pop())
    return picked
