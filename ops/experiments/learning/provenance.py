"""How a comparison was run, as results.json records it: the one command that reproduces it (machine paths
scrubbed, the sized step count pinned), the budget, and the machine kind it ran on."""

from __future__ import annotations

import os
import platform
import shlex
from pathlib import Path

from ops.experiments.learning.files import PathScrubber
from ops.experiments.learning.plan import Calibration, Plan, plan_seconds

CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
"""The CPU features that decide CPU training/inference speed (bf16 autocast needs avx512_bf16 or AMX)."""


def command_line(args, plan: Plan, out: str, scrub: PathScrubber) -> str:
    """`slca … bench learning …` with the plan's sizing pinned (`--steps`, `--curve-every`), so that a rerun on a
    faster or slower machine trains the same budget."""
    parts = ["slca", *(["--config", scrub.path(args.config)] if args.config else [])]
    parts += [a for s in args.set for a in ("--set", scrub.text(s))]
    parts += [
        "bench",
        "learning",
        *(["--model", scrub.path(args.model)] if args.model else []),
        "--arms",
        ",".join(plan.arms),
        "--seeds",
        ",".join(map(str, plan.seeds)),
        "--steps",
        str(plan.steps),
        "--minutes",
        f"{args.minutes:g}",
        "--pack",
        plan.pack,
        "--eval-items",
        str(plan.eval_items),
        "--eval-max-tokens",
        str(plan.eval_max_tokens),
        "--eval-engine",
        plan.eval_engine,
        "--curve",
        plan.curve,
        "--curve-every",
        str(plan.curve_every),
        "--curve-items",
        str(plan.curve_items),
        *[a for t in plan.train_args for a in ("--train-arg", scrub.text(t))],
        "--out",
        out,
    ]
    return shlex.join(parts)


def machine() -> dict:
    """The machine kind (no names or paths): CPU model, cores, the speed-deciding CPU flags, the GPU if any."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())  # the first processor's entry
    except OSError:
        pass
    flags = set(info.get("flags", "").split())
    gpu = None
    try:
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        pass
    return {
        "cpu": info.get("model name") or platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "cpu_flags": [f for f in CPU_FLAGS if f in flags],
        "gpu": gpu,
    }


def budget(
    plan: Plan, records: list[dict], cal: Calibration | None, calibration_s: float, minutes: float, warm: dict
) -> dict:
    """The equal budget every run got, and the time it took (estimated before, measured after)."""
    run_minutes = [r["seconds"] / 60 for r in records]
    estimate = (
        (calibration_s + plan_seconds(cal, len(plan.runs), plan.steps, plan.curve_every, plan.curve)) / 60
        if cal
        else None
    )
    return {
        "model": plan.model,
        "arms": list(plan.arms),
        "seeds": list(plan.seeds),
        "steps_per_run": plan.steps,
        "rollout_groups_per_run": plan.steps,
        "group_size": plan.group_size,
        "episodes_per_run": plan.steps * plan.group_size,
        "temperature": plan.temperature,
        "max_tokens_per_turn": plan.max_tokens,
        "lr": plan.lr,
        "lr_schedule": plan.lr_schedule,
        "train_tasks": f"{plan.pack} train split (one pool for every run), order and sampling by seed",
        "eval": f"{plan.pack} held-out splits test + novel, {warm.get('n_items', '?')} items"
        f"{'' if plan.eval_items == 0 else ' (a fixed sample)'}; greedy; the workers' scorer's success; "
        f"max {plan.eval_max_tokens} tokens per turn; engine {plan.eval_engine}",
        "curve": (
            f"eval: {plan.curve_items} fixed held-out items at steps 0, {plan.curve_steps}"
            if plan.curve == "eval"
            else "reward: per-step training execution reward"
        ),
        "minutes_limit": minutes,
        "estimate_minutes": None if estimate is None else round(estimate, 1),
        "calibration": None if cal is None else {k: round(v, 1) for k, v in vars(cal).items()},
        "measured_minutes": round((calibration_s + warm.get("eval_s", 0)) / 60 + sum(run_minutes), 1),
        "run_minutes_mean": round(sum(run_minutes) / len(run_minutes), 1) if run_minutes else None,
        "machine": machine(),
    }
