"""`slca bench sft-memory`'s parts: a child's status and output, its argv, steps' seconds from the summary."""

from __future__ import annotations

import sys

from ops.bench.sft_memory import run_child, sft_argv, step_seconds


def test_a_failing_or_stuck_child_is_its_status():
    assert run_child([sys.executable, "-c", "print('said'); raise SystemExit(3)"])[0] == 3
    code, tail = run_child([sys.executable, "-c", "print('said', flush=True); import time; time.sleep(60)"], 0.5)
    assert code == -9 and "said" in tail


def test_argv_and_step_seconds():
    argv = sft_argv(["learner.sft_gradient_checkpointing=true"], 3, 7, "/o")
    assert argv[1:] == [
        "-m",
        "slca",
        "--set",
        "learner.sft_gradient_checkpointing=true",
        "sft",
        "--steps",
        "3",
        "--seed",
        "7",
        "--eval-tasks",
        "0",
        "--out",
        "/o",
    ]
    assert step_seconds([{"elapsed_s": 2.0}, {"elapsed_s": 5.5}]) == [2.0, 3.5]
