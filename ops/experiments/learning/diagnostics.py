"""Per-run diagnostics of the mechanism (issue 14 §3), from the per-step JSON lines of `slca train`: where the
advantage lands (call vs summary tokens), how many groups give no signal, tool turns, the omission penalty.

The step figures are read back typed (`learner.step_stats.StepStats.from_log`, the one reader of the layout the
trainer's `to_log()` writes). A step whose line has no `all/tokens` trained no token: its group's advantages were all
zero and the trainer skipped it (`learner.skip_zero_advantage_groups`); it counts as |A| = 0 on both segment kinds."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import fmean

from learner.step_stats import MIN_PRESENT, StepStats
from slca.contracts import SegmentKind

DIAGNOSTICS = {
    "diag/adv_abs_tool_call": "mean |advantage| on tool-call tokens",
    "diag/adv_abs_summary": "mean |advantage| on summary tokens",
    "diag/zero_variance_share": "share of (group, channel) pairs with equal rewards (no signal)",
    "diag/zero_variance/<channel>": "the same, per channel of the arm's estimator (exec, pref, scalar, …)",
    "diag/zero_advantage_groups": "share of groups whose advantages were all zero",
    "diag/tool_turns": "tool turns per training episode",
    "diag/no_tool_task_tool_turns": "tool turns per training episode on tasks that need no tool (spurious calls)",
    "diag/omission_rate": "share of training episodes the omission penalty fired on",
    "train/exec_reward": "mean execution reward of the training rollouts",
}
"""Metric name → what it is (the results.md legend)."""


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def _adv_abs(steps: list[StepStats], kind: SegmentKind) -> float | None:
    values = []
    for stats in steps:
        if stats.loss is None:
            values.append(0.0)  # skipped all-zero group
        elif (value := stats.adv_abs_mean(kind)) is not None:
            values.append(value)
    return _mean(values)


def _zero_variance_flags(steps: list[StepStats]) -> dict[str, list[float]]:
    """Per channel, over every step whose channel had ≥ `MIN_PRESENT` members present: 1 where its rewards were all
    equal."""
    flags: dict[str, list[float]] = {}
    for stats in steps:
        for channel, figures in stats.estimator.channels.items():
            if figures.present is None or figures.present >= MIN_PRESENT:
                flags.setdefault(channel, []).append(float(figures.zero_variance > 0))
    return flags


def _zero_variance_share(steps: list[StepStats]) -> float | None:
    """Over every (step, channel) whose channel had ≥ `MIN_PRESENT` members present: the share with zero variance."""
    return _mean([f for flags in _zero_variance_flags(steps).values() for f in flags])


def run_diagnostics(lines: list[dict], no_tool_tasks: set[str] = frozenset()) -> dict[str, float | None]:
    """`{metric: value}` (None: `slca train` did not log what it needs). `no_tool_tasks`: ids of training tasks
    whose gold has no call (their steps give the spurious-call diagnostic)."""
    steps = [StepStats.from_log(x) for x in lines]
    zero_adv = [float(s.loss is None or s.loss.all.adv_abs == 0.0) for s in steps]
    per_channel = {f"diag/zero_variance/{c}": _mean(f) for c, f in sorted(_zero_variance_flags(steps).items())}
    no_tool = [
        float(x["tool_turns_mean"]) for x in lines if x.get("task_id") in no_tool_tasks and "tool_turns_mean" in x
    ]
    return {
        **per_channel,
        "diag/no_tool_task_tool_turns": _mean(no_tool),
        "diag/adv_abs_tool_call": _adv_abs(steps, SegmentKind.TOOL_CALL),
        "diag/adv_abs_summary": _adv_abs(steps, SegmentKind.SUMMARY),
        "diag/zero_variance_share": _zero_variance_share(steps),
        "diag/zero_advantage_groups": _mean(zero_adv),
        "diag/tool_turns": _mean([float(x["tool_turns_mean"]) for x in lines if "tool_turns_mean" in x]),
        "diag/omission_rate": _mean([float(x["omission_rate"]) for x in lines if "omission_rate" in x]),
        "train/exec_reward": _mean([float(x["exec_mean"]) for x in lines if "exec_mean" in x]),
    }


def step_series(lines: list[dict], key: str) -> list[list[float]]:
    """[[step, value], …] of one per-step field (the reward curve and the tool-turns panel)."""
    return [[int(x["step"]), float(x[key])] for x in lines if x.get(key) is not None]
