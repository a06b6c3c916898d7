"""The plan of a comparison and its budget arithmetic: which (arm, seed) runs, how many steps each, which steps
get a learning-curve point, and how long it all takes from a measured calibration."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal

CurveSource = Literal["eval", "reward"]
AUTO_CURVE_POINTS = 4
"""`--curve-every 0`: about this many curve points per run (besides the warm start's at step 0)."""
MAX_STEPS = 100_000


@dataclass(frozen=True)
class RunKey:
    arm: str
    """An arm of `ops.experiments.learning.arms` (an estimator and its advantage knobs)."""
    seed: int

    @property
    def name(self) -> str:
        """The run's folder under `<out>/runs/`."""
        return f"{self.arm}-s{self.seed}"


@dataclass(frozen=True)
class Calibration:
    """Measured seconds (one short `slca train` and the warm start's evaluation) that size the budget."""

    startup_s: float
    """One `slca train` process outside its steps: imports, model load, in-process server start."""
    step_s: float
    """One step: a rollout group through the server, scoring, the update, publish and hot-swap."""
    eval_s: float
    """One final evaluation (every held-out item, greedy)."""
    curve_eval_s: float
    """One curve point (the primary metric on the fixed curve subset); 0 when curves use the reward."""


@dataclass(frozen=True)
class Plan:
    """Everything that must be equal across runs (recorded in `<out>/plan.json`; a resumed command must match)."""

    model: str
    """The warm start, by name (no machine path)."""
    arms: tuple[str, ...]
    """Arm names (`ops.experiments.learning.arms`): each an estimator and its advantage knobs."""
    seeds: tuple[int, ...]
    steps: int
    """Optimizer steps per run = rollout groups per run (`slca train` trains on one group per step)."""
    group_size: int
    temperature: float
    max_tokens: int
    """Generated tokens per model turn in training rollouts."""
    lr: float
    lr_schedule: str
    pack: str
    """Task pack: its train split trains every run; its held-out splits (test, novel) evaluate every model. One
    pool and one split for every run: the seed only changes training order and sampling."""
    eval_items: int
    """Held-out items of the final evaluation: 0 every one of both splits (the real run), N a seeded sample (smoke
    tests); the same items for every model."""
    eval_max_tokens: int
    eval_engine: str
    curve: CurveSource
    curve_every: int
    curve_items: int
    """Held-out items of a curve point: a fixed seeded subset of the evaluation's items, the same at every step
    including step 0 (the warm start's outcomes on it)."""
    train_args: tuple[str, ...] = field(default=())

    @property
    def runs(self) -> list[RunKey]:
        """Seed-major: an interrupted comparison has every estimator at the seeds it reached, not one
        estimator at all seeds and the others at none."""
        return [RunKey(a, s) for s in self.seeds for a in self.arms]

    @property
    def curve_steps(self) -> list[int]:
        """Steps whose weights get a curve point (`curve == "eval"`); the final step always does."""
        return curve_steps(self.steps, self.curve_every) if self.curve == "eval" else []

    def to_json(self) -> dict:
        return asdict(self) | {"arms": list(self.arms), "seeds": list(self.seeds), "train_args": list(self.train_args)}

    @classmethod
    def from_json(cls, data: dict) -> Plan:
        return cls(
            **(
                data
                | {
                    "arms": tuple(data["arms"]),
                    "seeds": tuple(data["seeds"]),
                    "train_args": tuple(data.get("train_args", ())),
                }
            )
        )

    def differences(self, other: Plan) -> list[str]:
        """Fields where `other` differs (a resumed command must reproduce the recorded plan)."""
        mine, theirs = self.to_json(), other.to_json()
        return [f"{k}: recorded {mine[k]!r}, now {theirs[k]!r}" for k in mine if mine[k] != theirs[k]]


def auto_curve_every(steps: int) -> int:
    return max(1, math.ceil(steps / AUTO_CURVE_POINTS))


def curve_steps(steps: int, every: int) -> list[int]:
    """[every, 2·every, …] up to `steps`, and `steps` itself (the final model is always a point)."""
    if steps < 1:
        return []
    every = every or auto_curve_every(steps)
    return sorted({*range(every, steps + 1, every), steps})


def run_seconds(cal: Calibration, steps: int, curve_every: int, curve: CurveSource) -> float:
    """One run: startup, its steps, its curve points before the final step (the final point is read off the
    final evaluation's records), the final evaluation."""
    points = max(0, len(curve_steps(steps, curve_every)) - 1) if curve == "eval" else 0
    return cal.startup_s + steps * cal.step_s + points * cal.curve_eval_s + cal.eval_s


def plan_seconds(cal: Calibration, n_runs: int, steps: int, curve_every: int, curve: CurveSource) -> float:
    """The whole comparison: the warm start's evaluation (its curve point is read off it), then every run."""
    return cal.eval_s + n_runs * run_seconds(cal, steps, curve_every, curve)


def steps_for_minutes(
    cal: Calibration, minutes: float, n_runs: int, curve_every: int, curve: CurveSource, spent_s: float = 0.0
) -> int:
    """The most steps per run whose plan fits in `minutes` after `spent_s` already spent (0: not even one).
    `plan_seconds` grows with steps, so a bisection finds it."""
    budget = minutes * 60.0 - spent_s
    fits = lambda s: plan_seconds(cal, n_runs, s, curve_every, curve) <= budget  # noqa: E731
    if not fits(1):
        return 0
    lo, hi = 1, MAX_STEPS
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def describe(plan: Plan, cal: Calibration | None, spent_s: float = 0.0) -> str:
    """The plan as printed before starting: runs × steps × group size, and the estimate when measured."""
    n = len(plan.runs)
    curve = (
        f"curve: {plan.curve_items} fixed held-out items at steps 0, {plan.curve_steps}"
        if plan.curve == "eval"
        else "curve: per-step training execution reward (no curve evaluations)"
    )
    items = "every held-out item" if plan.eval_items == 0 else f"{plan.eval_items} held-out items"
    lines = [
        f"plan: {n} runs ({len(plan.arms)} arms {','.join(plan.arms)} × "
        f"{len(plan.seeds)} seeds {','.join(map(str, plan.seeds))}) × {plan.steps} steps × group "
        f"{plan.group_size} = {n * plan.steps * plan.group_size} episodes, from {plan.model}",
        f"      temperature {plan.temperature}, lr {plan.lr:g} ({plan.lr_schedule}), pack {plan.pack}; "
        f"final eval: {items} (test + novel), greedy, {plan.eval_engine}; {curve}",
    ]
    if cal is not None:
        total = spent_s + plan_seconds(cal, n, plan.steps, plan.curve_every, plan.curve)
        lines.append(
            f"      estimate: {total / 60:.0f} min ({spent_s / 60:.1f} spent calibrating; per run "
            f"{run_seconds(cal, plan.steps, plan.curve_every, plan.curve) / 60:.1f} min: startup "
            f"{cal.startup_s:.0f} s, {cal.step_s:.1f} s/step, eval {cal.eval_s:.0f} s, curve point "
            f"{cal.curve_eval_s:.0f} s)"
        )
    return "\n".join(lines)
