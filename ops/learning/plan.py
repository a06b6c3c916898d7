"""The plan of a comparison and its budget arithmetic: which (estimator, seed) runs, how many steps each, which
steps get a learning-curve point, and how long it all takes from a measured calibration."""

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
    estimator: str
    seed: int

    @property
    def name(self) -> str:
        """The run's folder under `<out>/runs/`."""
        return f"{self.estimator}-s{self.seed}"


@dataclass(frozen=True)
class Calibration:
    """Measured seconds (one short `slca train` and the warm start's evaluation) that size the budget."""

    startup_s: float
    """One `slca train` process outside its steps: imports, model load, in-process server start."""
    step_s: float
    """One step: a rollout group through the server, scoring, the update, publish and hot-swap."""
    eval_s: float
    """One final evaluation (in-domain test split and BFCL at `--eval-limit`)."""
    curve_eval_s: float
    """One curve point (the primary metric on the fixed in-domain subset); 0 when curves use the reward."""


@dataclass(frozen=True)
class Plan:
    """Everything that must be equal across runs (recorded in `<out>/plan.json`; a resumed command must match)."""

    model: str
    """The warm start, by name (no machine path)."""
    estimators: tuple[str, ...]
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
    eval_limit: int
    eval_max_tokens: int
    curve: CurveSource
    curve_every: int
    curve_limit: int
    train_args: tuple[str, ...] = field(default=())

    @property
    def runs(self) -> list[RunKey]:
        """Seed-major: an interrupted comparison has every estimator at the seeds it reached, not one
        estimator at all seeds and the others at none."""
        return [RunKey(e, s) for s in self.seeds for e in self.estimators]

    @property
    def curve_steps(self) -> list[int]:
        """Steps whose weights get a curve point (`curve == "eval"`); the final step always does."""
        return curve_steps(self.steps, self.curve_every) if self.curve == "eval" else []

    def to_json(self) -> dict:
        return asdict(self) | {"estimators": list(self.estimators), "seeds": list(self.seeds),
                               "train_args": list(self.train_args)}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> Plan:
        return cls(**(data | {"estimators": tuple(data["estimators"]), "seeds": tuple(data["seeds"]),
                              "train_args": tuple(data.get("train_args", ()))}))  # fmt: skip

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
    points = len(curve_steps(steps, curve_every)) if curve == "eval" else 0
    return cal.startup_s + steps * cal.step_s + points * cal.curve_eval_s + cal.eval_s


def plan_seconds(cal: Calibration, n_runs: int, steps: int, curve_every: int, curve: CurveSource) -> float:
    """The whole comparison: the warm start's evaluation (and its curve point), then every run."""
    warm = cal.eval_s + (cal.curve_eval_s if curve == "eval" else 0.0)
    return warm + n_runs * run_seconds(cal, steps, curve_every, curve)


def steps_for_minutes(cal: Calibration, minutes: float, n_runs: int, curve_every: int, curve: CurveSource,
                      spent_s: float = 0.0) -> int:  # fmt: skip
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
    curve = (f"curve: {plan.curve_limit} in-domain test tasks at steps {plan.curve_steps}" if plan.curve == "eval"
             else "curve: per-step training execution reward (no curve evaluations)")  # fmt: skip
    lines = [f"plan: {n} runs ({len(plan.estimators)} estimators {','.join(plan.estimators)} × "
             f"{len(plan.seeds)} seeds {','.join(map(str, plan.seeds))}) × {plan.steps} steps × group "
             f"{plan.group_size} = {n * plan.steps * plan.group_size} episodes, from {plan.model}",
             f"      temperature {plan.temperature}, lr {plan.lr:g} ({plan.lr_schedule}), pack {plan.pack}; "
             f"final eval: in-domain test + BFCL, {plan.eval_limit} per category, greedy; {curve}"]  # fmt: skip
    if cal is not None:
        total = spent_s + plan_seconds(cal, n, plan.steps, plan.curve_every, plan.curve)
        lines.append(f"      estimate: {total / 60:.0f} min ({spent_s / 60:.1f} spent calibrating; per run "
                     f"{run_seconds(cal, plan.steps, plan.curve_every, plan.curve) / 60:.1f} min: startup "
                     f"{cal.startup_s:.0f} s, {cal.step_s:.1f} s/step, eval {cal.eval_s:.0f} s, curve point "
                     f"{cal.curve_eval_s:.0f} s)")  # fmt: skip
    return "\n".join(lines)
