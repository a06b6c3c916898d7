"""A short measured `slca train` (the first arm and seed, `CALIBRATION_STEPS` steps) that, with the warm
start's evaluation time, sizes the steps per run. Kept in `<out>/calibration.json`; its weights are deleted."""

from __future__ import annotations

import shutil
from dataclasses import asdict, replace
from statistics import fmean

from ops.experiments.learning.files import read_json, write_json
from ops.experiments.learning.plan import Calibration
from ops.experiments.learning.runner import TrainContext, train

CALIBRATION_STEPS = 2
"""Two, not one: the first step also pays one-off costs (allocator, caches); their mean is less optimistic
than a later step alone and less pessimistic than the first alone."""


def step_seconds(line: dict) -> float:
    """A step's wall time as `slca train` logs it: rollouts (with scoring), update, publish, hot-swap."""
    return sum(float(line.get(k) or 0.0) for k in ("generate_s", "step_s", "publish_s", "swap_s"))


def calibrate(ctx: TrainContext, out, eval_s: float, curve_eval_s: float) -> tuple[Calibration, float]:
    """(calibration, seconds the calibration run took). Measured once per comparison folder."""
    path = out / "calibration.json"
    saved = read_json(path)
    if saved is not None:
        return Calibration(**saved["calibration"]), float(saved["seconds"])
    run_dir = out / "calibration"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    key = ctx.plan.runs[0]
    print(f"calibrating: `slca train` {CALIBRATION_STEPS} steps of {key.name} (then deleted) …", flush=True)
    outcome = train(
        replace(ctx, plan=replace(ctx.plan, steps=CALIBRATION_STEPS)), key, CALIBRATION_STEPS, run_dir, keep=set()
    )
    steps = [step_seconds(x) for x in outcome.lines]
    cal = Calibration(
        startup_s=max(0.0, outcome.seconds - sum(steps)), step_s=fmean(steps), eval_s=eval_s, curve_eval_s=curve_eval_s
    )
    write_json(path, {"calibration": asdict(cal), "seconds": round(outcome.seconds, 1), "steps": CALIBRATION_STEPS})
    shutil.rmtree(run_dir)
    return cal, outcome.seconds
