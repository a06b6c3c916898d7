"""`slca bench learn-vs-trl --block N`: one block of learning per hour against TRL (issue 40 item 1).

The plan of a block:
1. TRL importable (the `[bench]` extra), else a `CliError` before anything runs; the plan (`arms.plan`: budget,
   checkpoints, tasks, evaluation, both recipes) the same as every earlier block's under `--out` (`plan.json`,
   written by the first).
2. The warm start, the training probe and the test split (`recipe.eval_items`), the probe's tasks written once for
   both arms (`tasks.jsonl`), the warm start's greedy records (`recipe.warm_start_records`: cached by checksum).
3. Both arms in the block's order (`arms.order`: slca → trl in even blocks, trl → slca in odd ones), each trained for
   `--minutes` on its own clock (from the launch of its training process: start-up is paid alike), its model taken
   at every checkpoint (`slca_arm`, `trl_arm`).
4. Every checkpoint judged greedily on the training probe and the test split in a child process (`recipe.evaluate`);
   the per-item records `items-<minutes>.jsonl`, then `done.json`; then the report (`report.write_report`).

`<out>/blocks/b<N>/` holds `block.json` (plan, machine, load, order, times, warm start), `warm_start.items.jsonl`,
`tasks.jsonl` and per arm `arms/<arm>/`: the training's logs, `trained.json` (checkpoints: minutes, elapsed seconds,
version or step, steps, trajectories, tokens), `items-<m>.jsonl`, `done.json` (last). A rerun of the block skips a
finished arm, evaluates a trained one's missing checkpoints, redoes an interrupted training.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ops.bench.learn_vs_trl.arms import BLOCKS, TrlRecipe, order, plan
from ops.bench.rl.main import trl_available
from ops.experiments.learning.files import read_json, write_json
from slca.cli import CliError


@dataclass(frozen=True)
class Block:
    """What both arms of a block share."""

    args: object
    config: object
    model_dir: Path
    block_dir: Path
    items: list
    tasks_file: Path
    marks: list[float]
    trl: TrlRecipe

    @property
    def seed(self) -> int:
        """The block's number: both arms' training seed."""
        return self.args.block


def train_slca_arm(block: Block, arm_dir: Path) -> dict:
    from ops.bench.learn_vs_trl.slca_arm import train_slca

    return train_slca(block.args, block.model_dir, arm_dir, block.tasks_file, block.seed, block.marks)


def train_trl_arm(block: Block, arm_dir: Path) -> dict:
    from ops.bench.learn_vs_trl.trl_arm import train_trl, trl_spec

    spec = trl_spec(block.args, block.config, block.model_dir, block.tasks_file, block.seed, block.trl, block.marks)
    return train_trl(spec, arm_dir)


TRAINERS: dict[str, Callable[[Block, Path], dict]] = {"slca": train_slca_arm, "trl": train_trl_arm}
"""An arm's name → its training (`arms.ARMS`)."""


def require_trl() -> None:
    if not trl_available():
        raise CliError("TRL is not installed: `make install-bench` (the benchmark-only [bench] extra)")


def fix_plan(out: Path, fixed: dict) -> None:
    """The first block writes `<out>/plan.json`; a later one with another plan is refused (its blocks would not pair
    with the earlier ones)."""
    recorded = read_json(out / "plan.json")
    if recorded is None:
        write_json(out / "plan.json", {**fixed, "fixed_before": "the first block"})
        return
    recorded.pop("fixed_before", None)
    changed = sorted(k for k in set(recorded) | set(fixed) if recorded.get(k) != fixed.get(k))
    if changed:
        raise CliError(
            f"{out} was started with another plan ({', '.join(changed)} differ; see plan.json): use another --out"
        )


def run_arm(name: str, block: Block, warm_records: list) -> dict:
    """Train (unless `trained.json` says it is done), evaluate every checkpoint not yet judged, write `done.json`."""
    arm_dir = block.block_dir / "arms" / name
    done = read_json(arm_dir / "done.json")
    if done is not None:
        return done
    trained = read_json(arm_dir / "trained.json")
    if trained is None:
        shutil.rmtree(arm_dir, ignore_errors=True)
        arm_dir.mkdir(parents=True)
        load = round(os.getloadavg()[0], 2)
        print(f"  {name}: training for {block.marks[-1]:g} min, checkpoints {block.marks}", flush=True)
        trained = {"arm": name, "load_average_1m_start": load, **TRAINERS[name](block, arm_dir)}
        write_json(arm_dir / "trained.json", trained)
    for c in trained["checkpoints"]:
        if "eval_seconds" not in c:
            c["eval_seconds"] = evaluate_checkpoint(c, block, arm_dir, warm_records)
            write_json(arm_dir / "trained.json", trained)
    if not getattr(block.args, "keep_checkpoints", False):
        shutil.rmtree(arm_dir / "checkpoints", ignore_errors=True)
    done = {**trained, "load_average_1m_end": round(os.getloadavg()[0], 2)}
    write_json(arm_dir / "done.json", done)
    return done


def evaluate_checkpoint(c: dict, block: Block, arm_dir: Path, warm_records: list) -> float:
    """`items-<minutes>.jsonl`: the checkpoint's greedy records (the warm start's when nothing was published by its
    mark); the evaluation's seconds."""
    from ops.experiments.eval.suite import write_jsonl
    from ops.experiments.learning.recipe import evaluate

    minutes = f"{c['minutes']:g}"
    if c["dir"] is None:
        records, seconds = warm_records, 0.0
    else:
        print(f"  {arm_dir.name}: evaluating {minutes} min ({c['dir']})", flush=True)
        records, seconds = evaluate(arm_dir / c["dir"], block.items, block.args, arm_dir / f"eval-{minutes}.log")
    tmp = arm_dir / f".tmp-items-{minutes}.jsonl"
    write_jsonl(records, tmp)
    os.replace(tmp, arm_dir / f"items-{minutes}.jsonl")  # a half-written file is never taken for a judged one
    return round(seconds, 1)


def prepare(args, config) -> tuple[Block, dict]:
    """The block's shared parts and its `block.json` (written before the first arm trains)."""
    from ops.common.machine import machine_facts
    from ops.experiments.learning.recipe import eval_items, warm_start_records, world_seed
    from ops.experiments.warmstart.model import resolve_warm_start
    from sim.tasks import write_jsonl as write_tasks

    trl = TrlRecipe(lr=args.trl_lr)
    fixed = json.loads(json.dumps(plan(args, trl)))  # as plan.json holds it, so that the two compare
    fix_plan(args.out, fixed)
    model_dir = resolve_warm_start(args.model, config)
    block_dir = args.out / BLOCKS / f"b{args.block}"
    block_dir.mkdir(parents=True, exist_ok=True)
    items = eval_items(args.pack, args.probe_size)
    tasks_file = block_dir / "tasks.jsonl"
    write_tasks([i.task for i in items if i.suite == "train_probe"], tasks_file)
    block = Block(args, config, model_dir, block_dir, items, tasks_file, fixed["checkpoints"], trl)
    facts = machine_facts()
    warm = warm_start_records(model_dir, items, args, block_dir, Path(config.common.cache_dir) / "recipe-warm")
    recorded = read_json(block_dir / "block.json")
    if recorded is not None and recorded["warm_start"]["checksum"] != warm["checksum"]:
        raise CliError(f"block {args.block} was started from another warm start: its arms would not pair")
    meta = recorded or {
        "block": args.block,
        "plan": fixed,
        "machine": facts,
        "warm_start": {"model": model_dir.name, "checksum": warm["checksum"], "eval_seconds": warm["eval_seconds"]},
        "scorer_version": warm["scorer"],
        "order": order(args.block),
        "world_seed": world_seed(config),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json(block_dir / "block.json", meta)
    return block, {"meta": meta, "warm_records": warm["records"]}


def run_block(args, config) -> int:
    from ops.bench.learn_vs_trl.report import write_report

    if args.report:
        write_report(args.out)
        return 0
    require_trl()
    if args.block is None:
        raise CliError("--block N is required (the block's number sets its order and seed), or --report")
    block, shared = prepare(args, config)
    meta = shared["meta"]
    print(f"learn-vs-trl block {args.block}: {' → '.join(meta['order'])}; {block.marks[-1]:g} min each", flush=True)
    runs = {name: run_arm(name, block, shared["warm_records"]) for name in meta["order"]}
    meta["finished"] = meta.get("finished") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    meta["load_average_1m_end"] = round(os.getloadavg()[0], 2)
    meta["train_seconds"] = {name: run["train_seconds"] for name, run in runs.items()}
    write_json(block.block_dir / "block.json", meta)
    write_report(args.out)
    return 0
