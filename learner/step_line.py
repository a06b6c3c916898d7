"""One line of `<run_dir>/metrics.jsonl`, the learner's per-step file, typed (docs/design.md#metrics): the step's
place in the run (step, version, the groups it used, what it published) beside its figures (`StepStats`), written by
one method. The keys are a file format (`ops.observe.online` copies the file into `slca bench online`'s results;
committed runs hold it), so `to_json()` keeps them as they were when the line was a dict built by hand in
`learner.loop`; the figures' own keys come from `StepStats.to_log()`, their one writer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from learner.step_stats import StepStats

METRICS_FILE = "metrics.jsonl"
"""The per-step file's name in the learner's run directory (rank 0's; a follower rank writes `FollowerLine`s)."""


@dataclass(frozen=True)
class StepLine:
    step: int
    version: int
    """The learner's weight version after the step."""
    loss: float
    tokens: int
    """Generated tokens trained on."""
    tokens_per_s: float
    """Tokens the model ran per second of the step (packed rows)."""
    step_s: float
    advantage_s: float
    skipped_zero: int
    """Groups left out of the loss: every advantage zero."""
    groups: list[str]
    """The ids of the step's groups."""
    group_versions: list[int]
    """The oldest policy version of each group, in the order of `groups`."""
    exec_mean: float
    """Mean execution reward over every member of the step's groups."""
    published: int | None
    """The version this step published (None: no publish at this step)."""
    publish_s: float | None
    ts: float
    stats: StepStats

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "version": self.version,
            "loss": self.loss,
            "tokens": self.tokens,
            "tokens_per_s": self.tokens_per_s,
            "step_s": self.step_s,
            "advantage_s": self.advantage_s,
            "skipped_zero": self.skipped_zero,
            "groups": self.groups,
            "group_versions": self.group_versions,
            "exec_mean": self.exec_mean,
            "published": self.published,
            "publish_s": self.publish_s,
            "ts": self.ts,
            **self.stats.to_log(),
        }


@dataclass(frozen=True)
class FollowerLine:
    """A follower rank's line (`<run_dir>/rank<N>/metrics.jsonl`, `learner.follower`): which groups it trained."""

    step: int
    rank: int
    trained: list[str]
    loss: float
    ts: float

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "rank": self.rank, "trained": self.trained, "loss": self.loss, "ts": self.ts}


def append_line(run_dir: Path, line: StepLine | FollowerLine) -> None:
    """One JSON line at the end of `<run_dir>/metrics.jsonl`."""
    with open(run_dir / METRICS_FILE, "a") as fh:
        fh.write(json.dumps(line.to_json()) + "\n")
