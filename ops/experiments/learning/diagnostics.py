"""Per-run diagnostics of the mechanism (issue 14 §3), from the per-step JSON lines of `slca train`: where the
advantage lands (call vs summary tokens), how many groups give no signal, tool turns, the omission penalty.

A step whose line has no `all/tokens` trained no token: its group's advantages were all zero and the trainer
skipped it (`learner.skip_zero_advantage_groups`); it counts as |A| = 0 on both segment kinds."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import fmean

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


def _adv_abs(lines: list[dict], kind: str) -> float | None:
    values = []
    for line in lines:
        if "all/tokens" not in line:
            values.append(0.0)  # skipped all-zero group
        elif f"{kind}/adv_abs_mean" in line:
            values.append(float(line[f"{kind}/adv_abs_mean"]))
    return _mean(values)


def _zero_variance_flags(lines: list[dict]) -> dict[str, list[float]]:
    """Per channel, over every step whose channel had ≥ 2 members present: 1 where its rewards were all equal."""
    flags: dict[str, list[float]] = {}
    for line in lines:
        for key, value in line.items():
            if key.startswith("estimator/zero_variance/"):
                channel = key.removeprefix("estimator/zero_variance/")
                if line.get(f"estimator/present/{channel}", 2) >= 2:
                    flags.setdefault(channel, []).append(float(value > 0))
    return flags


def _zero_variance_share(lines: list[dict]) -> float | None:
    """Over every (step, channel) whose channel had ≥ 2 members present: the share with zero variance."""
    return _mean([f for flags in _zero_variance_flags(lines).values() for f in flags])


def run_diagnostics(lines: list[dict], no_tool_tasks: set[str] = frozenset()) -> dict[str, float | None]:
    """`{metric: value}` (None: `slca train` did not log what it needs). `no_tool_tasks`: ids of training tasks
    whose gold has no call (their steps give the spurious-call diagnostic)."""
    zero_adv = [float("all/tokens" not in x or float(x.get("all/adv_abs_mean", 0.0)) == 0.0) for x in lines]
    per_channel = {f"diag/zero_variance/{c}": _mean(f) for c, f in sorted(_zero_variance_flags(lines).items())}
    no_tool = [
        float(x["tool_turns_mean"]) for x in lines if x.get("task_id") in no_tool_tasks and "tool_turns_mean" in x
    ]
    return {
        **per_channel,
        "diag/no_tool_task_tool_turns": _mean(no_tool),
        "diag/adv_abs_tool_call": _adv_abs(lines, "tool_call"),
        "diag/adv_abs_summary": _adv_abs(lines, "summary"),
        "diag/zero_variance_share": _zero_variance_share(lines),
        "diag/zero_advantage_groups": _mean(zero_adv),
        "diag/tool_turns": _mean([float(x["tool_turns_mean"]) for x in lines if "tool_turns_mean" in x]),
        "diag/omission_rate": _mean([float(x["omission_rate"]) for x in lines if "omission_rate" in x]),
        "train/exec_reward": _mean([float(x["exec_mean"]) for x in lines if "exec_mean" in x]),
    }


def step_series(lines: list[dict], key: str) -> list[list[float]]:
    """[[step, value], …] of one per-step field (the reward curve and the tool-turns panel)."""
    return [[int(x["step"]), float(x[key])] for x in lines if x.get(key) is not None]
