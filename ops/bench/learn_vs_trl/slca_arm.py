"""slca's arm of a block: `slca train` (the learner's default recipe, `recipe.train_argv`) in a process of its own,
its versions taken at the marks (`capture`), then stopped at the last mark.

`slca train --steps 0 --minutes M` counts its own minutes from its first step; the arm's clock starts earlier, at the
launch, so the parent stops the run at the last mark (SIGINT: `slca train` stops its in-process server on the way
out), which comes before the run's own end. The per-step learner lines (`train.jsonl`) give each checkpoint's
steps, trajectories and tokens trained.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from pathlib import Path

from ops.bench.learn_vs_trl.capture import Captured, ChildFailed, capture_marks
from ops.bench.learn_vs_trl.child import log_tail, stop
from slca.cli import CliError


def figures(lines: list[dict], version: int) -> dict:
    """Steps, trajectories and tokens trained up to `version` (`slca train` publishes v<step> after step <step>)."""
    done = [line for line in lines if int(line.get("step", 0)) <= version]
    return {
        "steps": len(done),
        "trajectories": int(sum(line.get("trajectories_trained", 0) for line in done)),
        "tokens": int(sum(line.get("tokens_trained", line.get("tokens", 0)) for line in done)),
    }


def train_slca(args, model_dir: Path, arm_dir: Path, tasks_file: Path, seed: int, marks: list[float]) -> dict:
    """Train slca's arm and take its checkpoints; {"clock", "train_seconds", "settings", "checkpoints": [...]}, each
    checkpoint with its directory under `arm_dir` (None: the warm start)."""
    from ops.bench.learn_vs_trl.arms import slca_arm
    from ops.experiments.learning.diagnostics import read_jsonl
    from ops.experiments.learning.recipe import train_argv

    arm = slca_arm()
    work, log = arm_dir / "work", arm_dir / "train.jsonl"
    budget = argparse.Namespace(**{**vars(args), "trajectories": 0, "minutes": marks[-1]})
    argv = train_argv(arm, budget, model_dir, work, log, tasks_file, seed)
    weights = work / f"train-{arm.estimator}-{seed}" / "weights"
    clock_start = time.time()
    with open(arm_dir / "train.log", "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            taken = capture_marks(proc, weights, marks, arm_dir / "checkpoints", clock_start)
        except ChildFailed as exc:
            raise CliError(f"slca train failed ({exc}):\n{log_tail(arm_dir / 'train.log')}") from None
        finally:
            stop(proc)
    train_s = time.time() - clock_start
    lines = read_jsonl(log) if log.is_file() else []
    shutil.rmtree(work, ignore_errors=True)
    return {
        "clock": "from the launch of `slca train`",
        "train_seconds": round(train_s, 1),
        "settings": dict(arm.settings),
        "checkpoints": [checkpoint(c, lines) for c in taken],
    }


def checkpoint(c: Captured, lines: list[dict]) -> dict:
    where = f"checkpoints/{c.minutes:g}/v{c.version}"
    return {**c.to_dict(), **figures(lines, c.version), "dir": where if c.version else None}
