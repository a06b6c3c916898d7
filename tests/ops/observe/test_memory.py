"""slca up's memory accounting: each supervised process counted with its children, the peak of the sum at one
instant kept with each share, and the lines `slca status` prints from the state file."""

import subprocess
import sys

from ops.observe.memory import GIB, SystemMemory, memory_lines

CHILD = "import time; x = bytearray(48 << 20); print(1, flush=True); time.sleep(60)"
HOLDER = """
import subprocess, sys, time
block = bytearray({mib} << 20)
child = subprocess.Popen([sys.executable, "-c", {child!r}], stdout=subprocess.PIPE)
child.stdout.readline()
print("ready", flush=True)
time.sleep(60)
"""


def holder(mib: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(mib=mib, child=CHILD)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_each_process_is_counted_with_its_children_and_the_peak_of_the_sum_is_kept():
    big, small = holder(96), holder(16)
    memory = SystemMemory()
    try:
        memory.sample({"big": big.pid, "small": small.pid})
        now = memory.now
        assert now["big"] > (96 + 48) << 20 and (16 + 48) << 20 < now["small"] < now["big"]  # the child counted
        peak = memory.peak_total
        small.kill()
        small.wait()
        memory.sample({"big": big.pid, "small": small.pid})  # a process gone counts 0, its peak stays
        assert memory.now["small"] == 0 and memory.peak["small"] == now["small"]
        assert memory.peak_total == peak and memory.at_peak == now
    finally:
        for p in (big, small):
            p.kill()
            p.wait()


def test_status_lines_give_the_whole_system_against_the_target():
    memory = SystemMemory()
    memory.now = {"serve": 2 * GIB, "learn": 3 * GIB}
    memory.peak, memory.peak_total, memory.at_peak = (
        {"serve": int(3.5 * GIB), "learn": 4 * GIB},
        int(7 * GIB),
        {"serve": 3 * GIB, "learn": 4 * GIB},
    )
    text = memory_lines(memory.to_dict())
    assert "5.00 GiB now, peak 7.00 GiB for the whole system (OVER the 6 GiB target)" in text
    # each process: now (its own peak; its share of the system's peak) — never a "peak" below "now"
    assert "serve 2.00 (3.50; 3.00)  learn 3.00 (4.00; 4.00)" in text
    memory.now["serve"] = int(3.6 * GIB)  # sampled above the peak the state file last held: its own peak is now
    assert "serve 3.60 (3.60; 3.00)" in memory_lines(memory.to_dict())
    assert memory_lines(None) == "memory: not sampled yet"


def test_after_the_stop_the_lines_give_the_peaks_not_the_last_sample_of_exiting_processes():
    memory = SystemMemory()
    memory.now = {"serve": 5 * 1024**2, "learn": 0}  # `slca bench online` read "0.01 GiB now" after the run
    memory.peak, memory.peak_total, memory.at_peak = (
        {"serve": int(3.5 * GIB), "learn": 4 * GIB},
        int(7 * GIB),
        {"serve": 3 * GIB, "learn": 4 * GIB},
    )
    text = memory_lines(memory.to_dict(), running=False)
    assert "now" not in text and "the system has stopped; its peak was 7.00 GiB (OVER the 6 GiB target)" in text
    assert "serve (3.50; 3.00)  learn (4.00; 4.00)" in text
