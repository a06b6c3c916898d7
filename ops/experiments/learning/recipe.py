"""`slca bench recipe`: the recipe sweep, run in blocks.

A block = every arm of an arm set (`recipe_arms.ARM_SETS`: the recipe arms; the estimator arms or the tool sources at
one recipe) once, in an order rotated by the block's number, on one machine, each arm `slca train` for the same
budget from the same warm start on the same fixed training tasks (the training probe, `sim.tasks.probe`), then its
last version evaluated greedily on the training probe and the test split — in a child process (`recipe_eval`), so that
no engine thread of an evaluation is left in this process to slow the arms trained after it.
The block's warm start is evaluated on the same items in the same block (its outcomes cached under the model's
checksum, so a second block on the same machine reuses them): every arm is paired with it item by item, and
with its set's reference arm (`today`; the estimator arms: `slca`; the tool-source arms: `real`). Blocks from
other machines and days add up: the block is the unit of pairing, each keeps its machine facts and its own warm start.

The evaluation answers tool calls as the pack's tasks define them — the pack's real tools for real — whatever the
arm trained with: an arm's tool source (`RecipeArm.tools`) and settings reach its `slca train` alone, never the
evaluation (the items and the block's own `--config`/`--set`), so SGLS is never judged by itself.

`<out>/blocks/b<N>/` (the estimator arms: `<out>/estimator-blocks/b<N>/`; the tool sources: `<out>/tools-blocks/b<N>/`)
holds `block.json` (arm set, recipe, machine, load, order, times, warm-start checksum, world seed), the warm
start's `warm_start.items.jsonl`, and per arm `arms/<arm>/` with `train.jsonl` (per-step learner lines),
`train.log`, `eval.log`, `items.jsonl` (per-item records of its last version) and `done.json` (written last). A rerun
of the same block skips finished arms and redoes an interrupted one. `slca bench recipe --report` (or the end of a
block) writes `results.json`, `results.md` and `recipe.png` from every finished block (`recipe_report`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ops.experiments.learning.files import read_json, write_json
from ops.experiments.learning.recipe_arms import RecipeArm, arm_set, resolve, rotated
from slca.cli import CliError

SUITES = ("train_probe", "test")
"""What each arm's last version is judged on: the tasks it trained on, then the same-template held-out split."""


def eval_items(pack: str, probe_size: int) -> list:
    from ops.experiments.eval.suite import EvalItem
    from ops.common.tasks import load_pack
    from sim.tasks.probe import training_probe

    probe = [EvalItem("train_probe", t.task_id, task=t) for t in training_probe(pack, probe_size)]
    return probe + [EvalItem("test", t.task_id, task=t) for t in load_pack(pack, "test")]


def evaluate(model_dir: Path, items: list, args, log: Path) -> tuple[list, float]:
    """(records in item order, seconds): `model_dir` served in a child process (`recipe_eval`: the engine's
    threads leave with it), one greedy agent run per item; the child's output in `log`."""
    from ops.experiments.learning.recipe_eval import config_args
    from ops.experiments.learning.recipe_eval import evaluate as evaluate_in_child

    return evaluate_in_child(model_dir, items, args.eval_max_tokens, args.eval_engine, config_args(args), log)


def model_checksum(model_dir: Path) -> str:
    """The weights' identity (sha256 over the safetensors files): the warm start differs between machines."""
    h = hashlib.sha256()
    for path in sorted(model_dir.glob("*.safetensors")):
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


def warm_start_records(model_dir: Path, items: list, args, block_dir: Path, cache: Path) -> dict:
    """The warm start's per-item records for this block: computed once per model checksum and item set, then
    copied into every block on this warm start."""
    from ops.experiments.eval.suite import read_jsonl, write_jsonl

    from workers.settings import WorkerSettings

    target = block_dir / "warm_start.items.jsonl"
    checksum = model_checksum(model_dir)
    scorer = WorkerSettings().scorer_version  # what the evaluation scores with (ops.experiments.eval.items)
    parts = [checksum, scorer, str(args.eval_max_tokens), *(f"{i.suite}/{i.item_id}" for i in items)]
    key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
    cached = cache / f"warm-{key}.items.jsonl"
    cache.mkdir(parents=True, exist_ok=True)
    if not cached.is_file():
        records, seconds = evaluate(model_dir, items, args, cache / f"warm-{key}.eval.log")
        write_jsonl(records, cached)
        write_json(cache / f"warm-{key}.json", {"seconds": round(seconds, 1)})
    if not target.is_file():
        shutil.copyfile(cached, target)
    seconds = (read_json(cache / f"warm-{key}.json") or {}).get("seconds")
    return {"checksum": checksum, "scorer": scorer, "records": read_jsonl(target), "eval_seconds": seconds}


def train_argv(arm: RecipeArm, args, model_dir: Path, work: Path, log: Path, tasks_file: Path, seed: int):
    pinned = {
        "learner.init_model": model_dir,
        "common.model": model_dir,
        "learner.run_dir": work,
        "weights.keep_versions": 2,
        "learner.train_group_size": args.group_size,
    }
    sets = [a for k, v in pinned.items() for a in ("--set", f"{k}={v}")] + arm.set_args()
    return [
        sys.executable,
        "-m",
        "slca",
        *sets,
        *[a for s in args.set for a in ("--set", s)],
        "train",
        "--estimator",
        arm.estimator,
        "--tools",
        arm.tools,
        "--seed",
        str(seed),
        *budget_args(arm, args),
        "--tasks-file",
        str(tasks_file),
        "--pack",
        args.pack,
        "--log",
        str(log),
    ]


def budget_args(arm: RecipeArm, args) -> list[str]:
    """`--trajectories T`: every arm trains on T trajectories (steps = T / (groups per step × group size)), the
    same compute whatever else runs on the machine; `--minutes M`: every arm trains for M minutes."""
    if args.trajectories:
        groups = int(arm.settings.get("learner.groups_per_step", 1))
        steps = max(1, args.trajectories // (groups * args.group_size))
        return ["--steps", str(steps)]
    return ["--steps", "0", "--minutes", str(args.minutes)]


def last_version(weights_dir: Path) -> Path:
    from slca.contracts.weights import MANIFEST_NAME

    done = sorted(
        (int(p.name[1:]), p) for p in weights_dir.glob("v*") if p.name[1:].isdigit() and (p / MANIFEST_NAME).is_file()
    )
    if not done:
        raise CliError(f"no published version under {weights_dir}: the arm trained no step")
    return done[-1][1]


def run_arm(arm: RecipeArm, args, model_dir: Path, block_dir: Path, items: list, seed: int) -> dict:
    from ops.experiments.eval.suite import write_jsonl
    from ops.experiments.learning.diagnostics import read_jsonl

    run_dir = block_dir / "arms" / arm.name
    done = read_json(run_dir / "done.json")
    if done is not None:
        return done
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    work, log = run_dir / "work", run_dir / "train.jsonl"
    tasks_file = run_dir / "tasks.jsonl"
    from sim.tasks import write_jsonl as write_tasks

    write_tasks([i.task for i in items if i.suite == "train_probe"], tasks_file)
    argv = train_argv(arm, args, model_dir, work, log, tasks_file, seed)
    t0 = time.monotonic()
    with open(run_dir / "train.log", "wb") as out:
        status = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT)
    train_s = time.monotonic() - t0
    if status != 0:
        tail = (run_dir / "train.log").read_text(errors="replace").splitlines()[-15:]
        raise CliError(f"slca train (arm {arm.name}) failed (status {status}):\n" + "\n".join(tail))
    lines = read_jsonl(log)
    final = last_version(work / f"train-{arm.estimator}-{seed}" / "weights")
    print(f"  {arm.name}: {len(lines)} steps in {train_s:.0f} s, evaluating {final.name}", flush=True)
    records, eval_s = evaluate(final, items, args, run_dir / "eval.log")
    write_jsonl(records, run_dir / "items.jsonl")
    shutil.rmtree(work)
    record = {
        "arm": arm.name,
        "estimator": arm.estimator,
        "tools": arm.tools,
        "settings": {k: v for k, v in arm.settings.items()},
        "seed": seed,
        "version": int(final.name[1:]),
        "steps": len(lines),
        "train_seconds": round(train_s, 1),
        "eval_seconds": round(eval_s, 1),
        "trajectories": int(sum(line.get("trajectories_trained", 0) for line in lines)),
        "tokens": int(sum(line.get("tokens_trained", line.get("tokens", 0)) for line in lines)),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    write_json(run_dir / "done.json", record)
    return record


def same_block(recorded: dict | None, identity: dict) -> None:
    """A rerun of a block must be the same arm set at the same recipe: its finished arms are kept and paired with
    the ones it adds."""
    if recorded is None:
        return
    was = (recorded.get("arm_set", "recipe"), recorded.get("recipe"))  # blocks before arm sets: the recipe sweep
    now = (identity["arm_set"], identity["recipe"])
    if was != now:
        raise CliError(
            f"block {recorded['block']} was run as arm set {was[0]} (recipe {was[1]}), not {now[0]} ({now[1]})"
        )


def fix_target(out: Path, points: float) -> None:
    """Keep a target fixed before the first block (`--target-points`): a later block may not move it."""
    if not points:
        return
    recorded = read_json(out / "target.json")
    if recorded is not None and recorded["points"] != points:
        raise CliError(f"{out} was started with --target-points {recorded['points']:g}; a block may not change it")
    if recorded is None:
        write_json(out / "target.json", {"points": points, "suite": "train_probe", "fixed_before": "the first block"})


def block_record(args, identity: dict, facts: dict, arms: list[RecipeArm], model_dir: Path, warm: dict, config):
    """block.json: what the block ran and on what (machine, warm start, budget, evaluation, settings)."""
    return {
        "block": args.block,
        **identity,
        "machine": facts,
        "warm_start": {"model": model_dir.name, "checksum": warm["checksum"], "eval_seconds": warm["eval_seconds"]},
        "scorer_version": warm["scorer"],
        "order": [a.name for a in arms],
        "minutes": args.minutes if not args.trajectories else None,
        "trajectories": args.trajectories or None,
        "group_size": args.group_size,
        "pack": args.pack,
        "probe_size": args.probe_size,
        "eval_max_tokens": args.eval_max_tokens,
        "eval_engine": args.eval_engine,
        "extra_settings": list(args.set),
        "world_seed": world_seed(config),
    }


def world_seed(config) -> str | None:
    """The configured `sim.world_seed` (SGLS's, in training and in the evaluation's simulated tools)."""
    try:
        return config.section("sim").world_seed
    except ModuleNotFoundError:
        return None


def run_block(args, config) -> int:
    from ops.common.machine import machine_facts
    from ops.experiments.learning.recipe_report import write_report
    from ops.experiments.warmstart.model import resolve_warm_start

    out = args.out
    if args.report:
        write_report(out)
        return 0
    if args.block is None:
        raise CliError("--block N is required (the block's number sets its order and seed), or --report")
    if args.minutes <= 0 and args.trajectories <= 0:
        raise CliError("--minutes or --trajectories must be > 0 (every arm trains on the same budget)")
    fix_target(out, args.target_points)
    family = arm_set(args.arm_set)
    recipe = (args.recipe or family.recipe) if family.at_recipe else None
    arms = rotated(resolve(args.arms, family.arms(recipe)), args.block)
    model_dir = resolve_warm_start(args.model, config)
    block_dir = out / family.blocks / f"b{args.block}"
    identity = {"arm_set": family.name, "recipe": recipe}
    same_block(read_json(block_dir / "block.json"), identity)
    block_dir.mkdir(parents=True, exist_ok=True)
    items = eval_items(args.pack, args.probe_size)
    started = time.time()
    facts = machine_facts()
    each = f"{args.trajectories} trajectories" if args.trajectories else f"{args.minutes:g} min"
    print(f"{family.name} block {args.block}: {' → '.join(a.name for a in arms)}; {each} each", flush=True)
    # on this machine's cache, not in the results: another machine's warm start is another model
    warm = warm_start_records(model_dir, items, args, block_dir, Path(config.common.cache_dir) / "recipe-warm")
    block = block_record(args, identity, facts, arms, model_dir, warm, config)
    block["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    write_json(block_dir / "block.json", block)
    for arm in arms:
        run_arm(arm, args, model_dir, block_dir, items, seed=args.block)
    block["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    block["load_average_1m_end"] = round(os.getloadavg()[0], 2)
    write_json(block_dir / "block.json", block)
    write_report(out)
    return 0
