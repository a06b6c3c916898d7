"""One (arm, seed) run of a comparison: `slca train` in its own process (a fresh model and server each: nothing
leaks between runs), curve points on the weights it publishes, the final evaluation, then `done.json`.

`<out>/runs/<arm>-s<seed>/` holds `train.jsonl` (its per-step lines), `train.log` (its output), `items.jsonl`
(the final model's per-item records) and, written last and atomically, `done.json`. A folder without `done.json`
is an interrupted run: it is deleted and the run starts again from the warm start (`slca train` keeps no
optimizer state or task-order position to resume from, and a half-trained model would not be the equal
budget)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ops.experiments.learning.arms import resolve_arm
from ops.experiments.learning.diagnostics import read_jsonl, run_diagnostics, step_series
from ops.experiments.learning.evaluation import EvalSpec, curve_keys, flat_metrics, no_tool_keys, rate, run_eval
from ops.experiments.learning.files import read_json, write_json
from ops.experiments.learning.plan import Plan, RunKey
from slca.cli import CliError
from slca.config import Config
from slca.weights import prune_versions

POLL_S = 0.5


@dataclass(frozen=True)
class TrainContext:
    """What every `slca train` of a comparison shares."""

    config: Config
    config_args: tuple[str, ...]
    """The bench's own `--config` / `--set` arguments, passed on to every `slca train`."""
    model_dir: Path
    plan: Plan

    @property
    def spec(self) -> EvalSpec:
        p = self.plan
        return EvalSpec(
            pack=p.pack,
            max_tokens=p.eval_max_tokens,
            items=p.eval_items,
            curve_items=p.curve_items,
            engine=p.eval_engine,
        )


@dataclass(frozen=True)
class TrainOutcome:
    seconds: float
    lines: list[dict]
    weights_dir: Path


def train_argv(ctx: TrainContext, key: RunKey, steps: int, work: Path, log: Path) -> list[str]:
    """The budget is pinned on the command line, not left to whatever config each run would read; the arm adds
    its estimator and its advantage knobs, nothing else."""
    p, model, arm = ctx.plan, ctx.model_dir, resolve_arm(key.arm)
    pinned = {
        "learner.init_model": model,
        "common.model": model,  # the rollout server serves the same model
        "learner.run_dir": work,
        "weights.keep_versions": 0,  # the watcher below decides what to keep
        "learner.train_group_size": p.group_size,
        "learner.train_temperature": p.temperature,
        "learner.train_max_tokens": p.max_tokens,
        "learner.lr": p.lr,
    }
    sets = [a for k, v in pinned.items() for a in ("--set", f"{k}={v}")] + arm.set_args()
    return [
        sys.executable,
        "-m",
        "slca",
        *ctx.config_args,
        *sets,
        "train",
        "--estimator",
        arm.estimator,
        "--seed",
        str(key.seed),
        "--steps",
        str(steps),
        "--pack",
        p.pack,
        "--log",
        str(log),
        *p.train_args,
    ]


def prune(weights_dir: Path, keep: set[int]) -> None:
    """Delete every version but the newest and those in `keep` (`slca.weights.prune_versions`). Safe while training:
    `slca train` waits until the server serves vN before the next step, so no older version is still being loaded."""
    prune_versions(weights_dir, 1, keep)


def train(
    ctx: TrainContext,
    key: RunKey,
    steps: int,
    run_dir: Path,
    keep: set[int],
    on_step: Callable[[int], None] = lambda s: None,
) -> TrainOutcome:
    """Run `slca train` to the end; meanwhile prune unneeded versions and report each finished step."""
    work, log = run_dir / "work", run_dir / "train.jsonl"
    weights_dir = work / f"train-{resolve_arm(key.arm).estimator}-{key.seed}" / "weights"
    argv = train_argv(ctx, key, steps, work, log)
    t0 = time.monotonic()
    with open(run_dir / "train.log", "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        seen = 0
        while proc.poll() is None:
            time.sleep(POLL_S)
            prune(weights_dir, keep)
            n = len(read_jsonl(log))
            if n != seen:
                seen = n
                on_step(n)
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        tail = (run_dir / "train.log").read_text(errors="replace").splitlines()[-15:]
        raise CliError(
            f"slca train (arm {key.arm}) --seed {key.seed} failed (status "
            f"{proc.returncode}); last lines of {run_dir / 'train.log'}:\n" + "\n".join(tail)
        )
    prune(weights_dir, keep)
    lines = read_jsonl(log)
    if len(lines) != steps:
        raise CliError(f"slca train logged {len(lines)} of {steps} steps in {log}")
    return TrainOutcome(seconds, lines, weights_dir)


def load_done(run_dir: Path) -> dict | None:
    return read_json(run_dir / "done.json")


def run_one(ctx: TrainContext, key: RunKey, out: Path, phase: Callable[[str], None] = lambda s: None) -> dict:
    """The run's `done.json` record: final metrics, diagnostics, curves, seconds; its per-item records in
    `items.jsonl`. Already done → read back."""
    from ops.experiments.eval.suite import write_jsonl

    run_dir = out / "runs" / key.name
    done = load_done(run_dir)
    if done is not None:
        return done
    if run_dir.exists():
        shutil.rmtree(run_dir)  # interrupted before done.json: start again from the warm start
    run_dir.mkdir(parents=True)
    t0 = time.monotonic()
    steps, spec = ctx.plan.steps, ctx.spec
    outcome = train(
        ctx, key, steps, run_dir, set(ctx.plan.curve_steps) | {steps}, on_step=lambda n: phase(f"step {n}/{steps}")
    )
    keys = curve_keys(spec)
    curve = []
    for step in ctx.plan.curve_steps:
        if step == steps:
            continue  # the final point comes from the final evaluation's records, on the same items
        phase(f"curve point at step {step}")
        records, _ = run_eval(ctx.config, outcome.weights_dir / f"v{step}", spec, keys)
        curve.append([step, rate(records)])
    phase("final evaluation")
    # a fresh weights folder numbers versions from 1, one per step: v<steps> is the final model
    records, eval_s = run_eval(ctx.config, outcome.weights_dir / f"v{steps}", spec)
    write_jsonl(records, run_dir / "items.jsonl")
    if ctx.plan.curve == "eval":
        curve.append([steps, rate(records, keys)])
    shutil.rmtree(run_dir / "work")  # weights are large and not part of the result
    arm = resolve_arm(key.arm)
    record = {
        "arm": key.arm,
        "estimator": arm.estimator,
        "advantage": dict(arm.advantage),
        "seed": key.seed,
        "steps": steps,
        "seconds": round(time.monotonic() - t0, 1),
        "train_seconds": round(outcome.seconds, 1),
        "eval_seconds": round(eval_s, 1),
        "metrics": flat_metrics(records, no_tool_keys(spec)),
        "diagnostics": run_diagnostics(outcome.lines, train_no_tool(ctx.plan.pack)),
        "curve": curve,
        "exec_reward": step_series(outcome.lines, "exec_mean"),
        "tool_turns": step_series(outcome.lines, "tool_turns_mean"),
    }
    write_json(run_dir / "done.json", record)
    return record


def train_no_tool(pack: str) -> set[str]:
    """Task ids of the pack's train split whose gold has no call (the spurious-call diagnostic of training)."""
    from ops.common.tasks import load_pack

    return {t.task_id for t in load_pack(pack, "train") if not t.ground_truth.tool_needed}
