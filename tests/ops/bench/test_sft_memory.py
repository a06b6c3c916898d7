"""`slca bench sft-memory`'s parts: each window's peak is its own child's (wait4), steps' seconds from the summary."""

from __future__ import annotations

import sys

from ops.bench.sft_memory import run_child, sft_argv, step_seconds


def test_each_child_reports_its_own_peak_not_the_largest_so_far():
    big = "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); print('big')"
    small = "print('small')"
    code_big, peak_big, tail_big = run_child([sys.executable, "-c", big])
    code_small, peak_small, tail_small = run_child([sys.executable, "-c", small])
    assert (code_big, code_small) == (0, 0) and "big" in tail_big and "small" in tail_small
    assert peak_big > 300 and peak_small < 100  # RUSAGE_CHILDREN would have said ≥ 300 for both


def test_a_failing_or_stuck_child_is_its_status():
    assert run_child([sys.executable, "-c", "raise SystemExit(3)"])[0] == 3
    code, _, _ = run_child([sys.executable, "-c", "import time; time.sleep(60)"], timeout_s=0.5)
    assert code == -9


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
