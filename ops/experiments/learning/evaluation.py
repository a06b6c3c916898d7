"""The one evaluation of a comparison (`ops.experiments.eval.suite`): every model — the warm start and each run's final
checkpoint — answers the same held-out items greedily through an in-process server (`ops.experiments.eval.server`), one
`ItemRecord` per item. A curve point is the same on a fixed subset of those items. The warm start's evaluation is
kept in `<out>/warm_start.json` and `<out>/warm_start.items.jsonl` (`evaluate_warm_start`): the per-item outcomes
every arm is paired with, the curves' step 0, and the measured evaluation time that sizes the budget."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from pathlib import Path

from slca.config import Config

PRIMARY_METRIC = "held_out/success"
PRIMARY_WHY = (
    "Held-out success (`held_out/success`): the scorer's 0/1 `success` of each item of the task pack's two "
    "held-out splits together — `test` (the training templates, unseen tasks) and `novel` (unseen intents, tools "
    "and phrasings) — answered greedily through serve's agent loop. Chosen before the run: it is what the training "
    "reward aims at, all-or-nothing (partial credit cannot hide a wrong argument or a spurious call), on items no "
    "run trains on, and the same items for every model, so that comparisons are paired item by item."
)
CURVE_SEED = 0
"""Fixed: the curve subset and an `--eval-items` sample are the same for every model of every comparison."""
MIN_ITEMS = 200
"""Below this many held-out items a 10-point difference is hard to tell from noise (see
`ops.experiments.learning.inference`)."""


@dataclass(frozen=True)
class EvalSpec:
    pack: str
    max_tokens: int
    items: int
    """0: every held-out item; N: a seeded sample of N."""
    curve_items: int
    engine: str = "hf"

    def plan(self):
        from ops.experiments.eval.suite import EvalPlan

        return EvalPlan(
            splits=("test", "novel"), pack=self.pack, bfcl_categories=(), mode="greedy", max_tokens=self.max_tokens
        )


def item_key(suite: str, item_id: str) -> str:
    """An item's key across runs: its split and id (the per-item files and the pairing use it)."""
    return f"{suite}/{item_id}"


def sample(items: list, n: int) -> list:
    """`n` items drawn with the fixed seed, in plan order (all of them when n is 0 or covers them)."""
    if n <= 0 or n >= len(items):
        return list(items)
    keep = set(random.Random(CURVE_SEED).sample(range(len(items)), n))
    return [it for i, it in enumerate(items) if i in keep]


def eval_items(spec: EvalSpec) -> list:
    """The final evaluation's items (every model answers exactly these)."""
    from ops.experiments.eval.suite import plan_items

    return sample(plan_items(spec.plan()), spec.items)


def curve_keys(spec: EvalSpec) -> set[str]:
    """The curve subset, as item keys: a fixed sample of the evaluation's items."""
    return {item_key(i.suite, i.item_id) for i in sample(eval_items(spec), spec.curve_items)}


def run_eval(config: Config, model_dir: Path, spec: EvalSpec, keys: set[str] | None = None) -> tuple[list, float]:
    """(records, seconds): `model_dir` served in-process, every evaluation item (or those in `keys`) one greedy
    request, records in item order."""
    from ops.experiments.eval.server import eval_server
    from ops.experiments.eval.suite import run_items

    items = [i for i in eval_items(spec) if keys is None or item_key(i.suite, i.item_id) in keys]
    t0 = time.monotonic()
    with eval_server(config, model_dir, spec.engine) as server:
        records = asyncio.run(run_items(server.url, server.admin_token, items, spec.plan()))
    return records, time.monotonic() - t0


def outcomes(records) -> dict[str, bool]:
    """`{item key: success}` of one model (a failed request is a failure: it stays in, never dropped)."""
    return {item_key(r.suite, r.item_id): bool(r.success) for r in records}


def rate(records, keys: set[str] | None = None) -> float:
    """Success rate over `records` (or those whose key is in `keys`): the same items at every curve point."""
    chosen = [r.success for r in records if keys is None or item_key(r.suite, r.item_id) in keys]
    return sum(chosen) / len(chosen) if chosen else 0.0


def flat_metrics(records, no_tool: set[str]) -> dict[str, float]:
    """`{"held_out/success", "test/success", "novel/success", "held_out/exec", "held_out/spurious_call_rate"}`:
    the per-split and pooled summaries of `ops.experiments.eval.suite.summarize`, and how often a model called a tool on
    a held-out task that needs none (`no_tool`: their item keys)."""
    from ops.experiments.eval.suite import summarize

    out: dict[str, float] = {}
    for name, row in summarize(records).items():
        out[f"{name}/success"] = float(row["success"])
        if row.get("exec") is not None:
            out[f"{name}/exec"] = float(row["exec"])
        out[f"{name}/errors"] = float(row["errors"])
    spurious = [bool(r.calls) for r in records if item_key(r.suite, r.item_id) in no_tool]
    if spurious:
        out["held_out/spurious_call_rate"] = sum(spurious) / len(spurious)
    return out


def no_tool_keys(spec: EvalSpec) -> set[str]:
    """Keys of the evaluation items whose task's gold has no call."""
    return {
        item_key(i.suite, i.item_id)
        for i in eval_items(spec)
        if i.task is not None and not i.task.ground_truth.tool_needed
    }


WARM_ITEMS = "warm_start.items.jsonl"


def evaluate_warm_start(config: Config, model_dir: Path, spec: EvalSpec, out: Path) -> dict:
    """`{"model", "metrics", "eval_s", "curve_eval_s", "n_items"}`, evaluated once per comparison folder (greedy: one
    model, one answer per item), its per-item records in `warm_start.items.jsonl`. Its curve point at step 0 is
    its outcomes on the curve subset (`curve0`): the same items as every later point. A curve point's time is
    estimated from the full evaluation's, pro rata (no second evaluation to measure it)."""
    from ops.experiments.eval.suite import read_jsonl, write_jsonl
    from ops.experiments.learning.files import read_json, write_json

    path, items_path = out / "warm_start.json", out / WARM_ITEMS
    saved = read_json(path)
    if saved is not None and items_path.is_file():
        return saved | {"records": read_jsonl(items_path)}
    records, eval_s = run_eval(config, model_dir, spec)
    write_jsonl(records, items_path)
    n = len(records)
    curve_s = eval_s * min(spec.curve_items, n) / n if n else 0.0
    record = {
        "model": model_dir.name,
        "metrics": flat_metrics(records, no_tool_keys(spec)),
        "curve0": rate(records, curve_keys(spec)),
        "eval_s": round(eval_s, 1),
        "curve_eval_s": round(curve_s, 1),
        "n_items": n,
    }
    write_json(path, record)  # written last: its presence means the items file is complete
    return record | {"records": records}
