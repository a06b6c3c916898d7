"""The progress line: runs done / total, the current run, and an ETA from measured runs (the plan's estimate
before any has finished)."""

import io

from ops.experiments.learning.progress import Progress, fmt_minutes


def test_eta_uses_the_plan_then_the_measured_runs():
    stream = io.StringIO()
    p = Progress(total_runs=4, estimate_run_s=600.0, stream=stream)
    assert p.eta_s() == 2400.0 and "ETA 40m00s (from the plan)" in p.line()
    p.finished(120.0, skipped=True)  # a run done in an earlier invocation counts with its measured time
    p.finished(180.0)
    assert p.eta_s() == 2 * 150.0
    p.start("grpo-s1")
    p.set_phase("step 3/10")
    line = stream.getvalue().splitlines()[-1]
    assert line.startswith("bench learning: runs 2/4 done (1 from before) · now grpo-s1: step 3/10 · elapsed ")
    assert "from 2 measured runs" in line
    assert Progress(2, None).line().endswith("ETA unknown")


def test_fmt_minutes():
    assert (fmt_minutes(75), fmt_minutes(3725), fmt_minutes(-1)) == ("1m15s", "1h02m", "0m00s")
