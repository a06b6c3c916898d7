"""The one evaluation path: `slca eval`, the online held-out probe and the estimator comparison all plan items
here, run them against a running slca server and summarize the per-item records.

- `plan_items(plan)`: every task of the pack's held-out splits (test: same templates as training; novel: unseen
  intents, tools and phrasings), the training-task probe (`train_probe`: a fixed sample of the train split,
  stratified over intents, `sim.tasks.probe.training_probe` — the tasks the learner trains on) and the BFCL
  categories, whole or a seeded random sample (never the first N: BFCL files are ordered, their first items are
  the easy ones).
- `run_items(base_url, api_key, items, plan)`: each item one request to the server, `plan.concurrency` in flight so
  the engine batches them; a failed request becomes a failed record with `error` (never dropped).
- `summarize(records)`, `paired(a, b)`: rates with Wilson 95% intervals; paired differences with a bootstrap 95%
  interval and the exact McNemar test (`ops.experiments.eval.stats`).
- `write_jsonl` / `read_jsonl`: one line per item and run.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ops.experiments.eval.bfcl import BfclCase
from ops.experiments.eval.stats import TRAIN_PROBE, compare, paired, summarize
from slca.contracts import Task

__all__ = [
    "EvalItem",
    "EvalPlan",
    "ItemRecord",
    "compare",
    "paired",
    "plan_items",
    "read_jsonl",
    "run_items",
    "summarize",
    "write_jsonl",
]

MODES = ("greedy", "sampled")


@dataclass
class EvalItem:
    """One thing to evaluate: a task of the pack (`task`) or a BFCL case (`case`)."""

    suite: str
    """'test' | 'novel' (task pack splits) | 'train_probe' (the training-task probe) | 'bfcl:<category>'."""
    item_id: str
    task: Task | None = None
    case: BfclCase | None = None

    @property
    def seed(self) -> int:
        """The item's own sampling seed (sampled mode): stable across runs and processes, unlike `hash()`."""
        import zlib

        return zlib.crc32(f"{self.suite}/{self.item_id}".encode()) & 0x7FFFFFFF


@dataclass
class ItemRecord:
    """One item of one run (one JSONL line)."""

    suite: str
    item_id: str
    success: bool
    """Tasks: the scorer's `success` component (every gold call matched by name and value, no invented call or
    argument, reply checks hold). BFCL: BFCL's ast_checker verdict (irrelevance: no call) and no malformed block."""
    exec: float | None
    """HierR execution reward (tasks; None for BFCL)."""
    pref: float | None
    """HierR preference reward (tasks; None for BFCL)."""
    components: dict[str, float] = field(default_factory=dict)
    calls: list[dict] = field(default_factory=list)
    """Every call the model wrote, in order: {name, arguments, valid} (+ turn for tasks)."""
    reply: str = ""
    """The final assistant text (tasks: the last assistant message; BFCL: the text outside calls)."""
    policy_version: int | None = None
    error: str | None = None
    """Why the request failed (the item counts as a failure); None when it ran."""
    detail: str | None = None
    """Why an item that ran failed, when the checker says (BFCL's checker errors, a malformed call)."""


@dataclass(frozen=True)
class EvalPlan:
    splits: tuple[str, ...] = ("test", "novel", TRAIN_PROBE)
    """Splits of the task pack: held-out ones (every task of each) and `train_probe`, the training-task probe
    (`train_probe_size` train tasks, fixed)."""
    pack: str = "everyday"
    train_probe_size: int = 64
    """Tasks of the training-task probe (`sim.tasks.probe.training_probe`: stratified over intents, its own seed)."""
    bfcl_categories: tuple[str, ...] = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
    bfcl_per_category: int | None = None
    """None: every item of each category; N: a seeded random sample of N (never the first N)."""
    bfcl_seed: int = 0
    mode: str = "greedy"
    """'greedy' (temperature 0) or 'sampled' (temperature 1, seeded per item: `EvalItem.seed`)."""
    max_tokens: int = 256
    max_turns: int = 3
    concurrency: int = 16
    """Requests in flight: the server's engine batches them (vLLM's scheduler takes them all in one batch)."""

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown eval mode {self.mode!r}; known: {', '.join(MODES)}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be ≥ 1, got {self.concurrency}")


def bfcl_sample(cases: list[BfclCase], n: int | None, seed: int) -> list[BfclCase]:
    """`n` cases drawn at random (seeded by `seed` and the category, so one category's draw does not shift when
    another is added), in file order; all of them when `n` is None or covers the category."""
    if n is None or n >= len(cases):
        return list(cases)
    category = cases[0].category if cases else ""
    picked = set(random.Random(f"{seed}:{category}").sample(range(len(cases)), n))
    return [c for i, c in enumerate(cases) if i in picked]


def split_tasks(plan: EvalPlan, split: str) -> list[Task]:
    """The tasks of one split of the plan: every task of a held-out split, or the training-task probe."""
    if split == TRAIN_PROBE:
        from sim.tasks.probe import training_probe

        return training_probe(plan.pack, plan.train_probe_size)
    from ops.run.feed.tasks import load_pack

    return load_pack(plan.pack, split)


def plan_items(plan: EvalPlan) -> list[EvalItem]:
    """The plan's items: every task of each split (the training-task probe's sample for `train_probe`), then the
    BFCL cases per category."""
    from ops.experiments.eval.bfcl import load_category

    items = [EvalItem(split, t.task_id, task=t) for split in plan.splits for t in split_tasks(plan, split)]
    for category in plan.bfcl_categories:
        cases = bfcl_sample(load_category(category), plan.bfcl_per_category, plan.bfcl_seed)
        items += [EvalItem(f"bfcl:{category}", c.id, case=c) for c in cases]
    return items


async def run_items(
    base_url: str,
    api_key: str | None,
    items: list[EvalItem],
    plan: EvalPlan,
    on_done: Callable[[], None] = lambda: None,
    headers: dict[str, str] | None = None,
) -> list[ItemRecord]:
    """Every item against the slca server at `base_url`, `plan.concurrency` in flight; records in item order.
    `headers`: sent with every request (the gate's version pin, `X-SLCA-Pin-Version`)."""
    import aiohttp

    from ops.experiments.eval.items import run_bfcl_item, run_task_item

    gate = asyncio.Semaphore(plan.concurrency)
    headers = {**(headers or {}), **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    # no client timeout: the server bounds each engine wait (serve.engine_timeout_s), an episode is several
    async with aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=None)) as http:

        async def one(item: EvalItem) -> ItemRecord:
            async with gate:
                run = run_task_item if item.task is not None else run_bfcl_item
                record = await run(http, base_url, item, plan)
            on_done()
            return record

        return list(await asyncio.gather(*(one(i) for i in items)))


def write_jsonl(records: list[ItemRecord], path: str | Path) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(asdict(r), ensure_ascii=False) + "\n")


def read_jsonl(path: str | Path) -> list[ItemRecord]:
    with open(path, encoding="utf-8") as fh:
        return [ItemRecord(**json.loads(line)) for line in fh if line.strip()]
