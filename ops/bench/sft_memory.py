"""`slca bench sft-memory`: what the warm start (`slca sft`) costs in memory and in time, for two settings side by side.

The warm start trains beside serving on a fresh machine, and its peak was the system's (`slca sft` ≈ 10 GiB of a
13.8 GiB system on an avx2-only EPYC, 2026-12-06). Side A is `slca sft` with `--a-set` (default
`learner.sft_gradient_checkpointing=false`), side B with A's settings and `--b-set` (default `…=true`).

Each window is the real command in a fresh child process (`python -m slca --set … sft --steps N --eval-tasks 0`,
written to a temporary directory, removed after), so that its peak resident set (its own VmHWM, which `slca sft`
writes in `sft-summary.json`) is the peak of that setting alone, loading and saving included. The figure is the
child's trained tokens per second (`sft-summary.json`: the real tokens of its steps over their seconds); the peak
RSS of each window is reported beside it. Windows alternate A B / B A (ops/bench/ab.py); every window trains the
same steps on the same batches (`--seed`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ops.bench.ab import Measurement
from ops.bench.learner_memory import run_memory_ab

CHILD_TIMEOUT_S = 3600.0


def sft_argv(sets: list[str], steps: int, seed: int, out: Path) -> list[str]:
    """The child: `slca sft` as `slca up`'s warm start runs it, without the before/after checks (generation)."""
    argv = [sys.executable, "-m", "slca"]
    for s in sets:
        argv += ["--set", s]
    return [*argv, "sft", "--steps", str(steps), "--seed", str(seed), "--eval-tasks", "0", "--out", str(out)]


def run_child(argv: list[str], timeout_s: float = CHILD_TIMEOUT_S) -> tuple[int, str]:
    """(exit status, the tail of its output); killed past `timeout_s`. The peak is the child's own report
    (`sft-summary.json` `peak_rss_mib`, its VmHWM): `wait4`'s `ru_maxrss` counts the forked parent's pages before the
    exec too (2.6 GiB for `print()` under a pytest worker)."""
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.seek(0)
        tail = log.read()[-3000:].decode(errors="replace")
    return proc.returncode, tail


def step_seconds(history: list[dict]) -> list[float]:
    """Each step's seconds, from the cumulative `elapsed_s` of `sft-summary.json`'s history."""
    ends = [h["elapsed_s"] for h in history]
    return [round(end - start, 2) for start, end in zip([0.0, *ends], ends)]


def _window(args, sets: list[str]) -> Measurement:
    out = Path(tempfile.mkdtemp(prefix="slca-bench-sft-memory-"))
    try:
        code, tail = run_child(sft_argv(sets, args.steps, args.seed, out))
        summary_path = out / "sft-summary.json"
        if code != 0 or not summary_path.is_file():
            raise RuntimeError(f"slca sft failed (exit {code}): {tail}")
        summary = json.loads(summary_path.read_text())
    finally:
        shutil.rmtree(out, ignore_errors=True)
    tokens = sum(h["tokens"] for h in summary["history"])
    detail = {
        "peak_rss_mib": summary["peak_rss_mib"],
        "step_s": step_seconds(summary["history"]),
        "precision": summary["precision"],
        "gradient_checkpointing": summary.get("gradient_checkpointing"),
        "batch_tokens": summary["batch_tokens"],
    }
    return Measurement(tokens / summary["train_s"], tokens, summary["train_s"], summary["steps"], detail)


def run_sft_memory(args, config) -> int:
    header = {"steps_per_window": args.steps, "seed": args.seed}
    heading = "Peak RSS per window (MiB, the `slca sft` child: load, the steps, saving):"
    return run_memory_ab(args, config, _window, "sft-memory", header, heading)
