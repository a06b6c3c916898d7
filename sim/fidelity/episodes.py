"""The episodes `slca sim fidelity` replays: a domain's expected calls, in order, as one episode per task.

τ² airline and retail: each task's expected actions (`evaluation_criteria.actions`). The everyday pack: the gold
calls of its test and novel task splits. A deterministic sample (`limit`) spreads over the whole list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sim.real import RealTool

DOMAINS = ("airline", "retail", "everyday")


@dataclass
class Step:
    tool: str
    arguments: dict[str, Any]
    label: str = "expected"
    """'expected' (a gold call) or the failure-set variant that made it (`sim.fidelity.variants`)."""


@dataclass
class Episode:
    domain: str
    episode_id: str
    steps: list[Step] = field(default_factory=list)


def expected_episodes(domain: str, tools: dict[str, RealTool]) -> list[Episode]:
    """The domain's episodes of expected calls (calls to tools the pack lacks are left out)."""
    if domain == "everyday":
        from sim.tasks import load_tasks

        tasks = load_tasks("everyday", "test") + load_tasks("everyday", "novel")
        calls = [(t.task_id, [(c.name, c.arguments) for c in t.ground_truth.calls]) for t in tasks]
    else:
        from sim.real.tau2 import tasks_path

        with open(tasks_path(domain), encoding="utf-8") as fh:
            raw = json.load(fh)
        calls = [
            (
                str(t["id"]),
                [
                    (a["name"], a.get("arguments") or {})
                    for a in (t.get("evaluation_criteria") or {}).get("actions") or []
                ],
            )
            for t in raw
        ]
    episodes = []
    for episode_id, pairs in calls:
        steps = [Step(name, dict(args)) for name, args in pairs if name in tools]
        if steps:
            episodes.append(Episode(domain, episode_id, steps))
    return episodes


def sample(episodes: list[Episode], limit: int | None) -> list[Episode]:
    """`limit` episodes spread evenly over the list (all of them when None or larger)."""
    if limit is None or limit >= len(episodes):
        return episodes
    if limit <= 0:
        return []
    stride = len(episodes) / limit
    return [episodes[int(i * stride)] for i in range(limit)]
