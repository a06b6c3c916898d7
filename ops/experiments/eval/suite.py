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
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from ops.experiments.eval.bfcl import BfclCase
from ops.experiments.eval.records import MODES, EvalItem, EvalPlan, ItemRecord
from ops.experiments.eval.stats import TRAIN_PROBE, compare, paired, summarize
from slca.contracts import Task

__all__ = [
    "MODES",
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
    from ops.common.tasks import load_pack

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
