"""The supervisor with small real child processes: crash → restart with back-off; SIGTERM → clean stop."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ops.run.supervisor import Backoff, ManagedProcess, ProcessSpec, ProcessState, Supervisor
from tests.support.wait import wait_for

pytestmark = pytest.mark.timed  # stop deadlines and latency bounds: alone, in the serial phase

PY = sys.executable
HELPER = Path(__file__).with_name("run_supervisor.py")
REPO = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize("crashes,expected", [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (10, 5.0)])
def test_backoff_doubles_and_caps(crashes, expected):
    assert Backoff(0.5, 5.0, 60.0).delay(crashes) == expected


def test_backoff_resets_after_a_healthy_run(tmp_path):
    now = [0.0]
    proc = ManagedProcess(
        ProcessSpec("x", [PY, "-c", "raise SystemExit(1)"], tmp_path / "x.log"),
        Backoff(1.0, 60.0, 10.0),
        clock=lambda: now[0],
    )
    proc.start()
    proc.proc.wait()
    assert proc.poll() and proc.restart_at == 1.0  # first crash: initial delay
    now[0] = 1.0
    proc.restart()
    proc.proc.wait()
    assert proc.poll() and proc.restart_at == 1.0 + 2.0  # crash right after restart: doubled
    now[0] = 3.0
    proc.restart()
    proc.proc.wait()
    now[0] = 3.0 + 11.0  # it ran longer than reset_after_s before crashing
    assert proc.poll() and proc.restart_at == now[0] + 1.0
    assert proc.restarts == 2


def test_crashed_child_is_restarted_with_growing_delay(tmp_path):
    counter = tmp_path / "runs"
    code = f"open({str(counter)!r}, 'a').write('x'); import sys; sys.exit(3)"
    sup = Supervisor(
        [ProcessSpec("crasher", [PY, "-c", code], tmp_path / "crasher.log")],
        Backoff(0.1, 1.0, 60.0),
        grace_s=2.0,
        poll_interval_s=0.01,
    )
    sup.start_all()
    proc = sup.get("crasher")
    delays = []
    try:
        deadline = time.monotonic() + 20
        while not (proc.restarts == 3 and proc.state == ProcessState.BACKOFF) and time.monotonic() < deadline:
            was = proc.state
            sup.tick()
            if was == ProcessState.RUNNING and proc.state == ProcessState.BACKOFF:
                delays.append(round(proc.restart_at - proc.clock(), 2))
            time.sleep(0.01)
    finally:
        sup.stop_all()
    assert proc.last_exit == 3
    assert counter.read_text() == "xxxx"  # the first run and three restarts
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8], abs=0.03)
    assert "starting crasher" in (tmp_path / "crasher.log").read_text()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_stops_every_child_group_then_exits(tmp_path):
    # a child that spawns a grandchild (as a Celery worker does), and one that ignores SIGTERM (→ SIGKILL)
    with_grandchild = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); time.sleep(300)"
    )
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
    plan = {
        "log_dir": str(tmp_path),
        "grace_s": 1.0,
        "children": {"parent": [PY, "-c", with_grandchild], "stubborn": [PY, "-c", stubborn]},
    }
    sup = subprocess.Popen(
        [PY, str(HELPER), json.dumps(plan)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    pids_file = tmp_path / "pids.json"
    try:
        wait_for(lambda: pids_file.exists() and all(json.loads(pids_file.read_text()).values()))
        pids = json.loads(pids_file.read_text())
        # the grandchild is in the parent's group: wait until it exists
        wait_for(
            lambda: (
                len(subprocess.run(["pgrep", "-g", str(pids["parent"])], capture_output=True, text=True).stdout.split())
                == 2
            )
        )
        started = time.monotonic()
        sup.send_signal(signal.SIGTERM)
        out, _ = sup.communicate(timeout=20)
        took = time.monotonic() - started
    finally:
        if sup.poll() is None:
            sup.kill()
    assert sup.returncode == 0, out.decode()
    # an orphaned grandchild is a zombie until init reaps it: give that a moment
    wait_for(lambda: not _group_alive(pids["parent"]) and not _group_alive(pids["stubborn"]), 5)
    assert took < 10  # grace 1 s, then SIGKILL: no hang on the stubborn child
    assert b"stopped stubborn" in out and b"stopped parent" in out


def test_a_clean_exit_is_done_not_restarted(tmp_path):
    sup = Supervisor([ProcessSpec("oneshot", [PY, "-c", "pass"], tmp_path / "o.log")], Backoff(0.01, 0.1, 60.0))
    sup.start_all()
    proc = sup.get("oneshot")
    proc.proc.wait()
    for _ in range(5):
        sup.tick()
        time.sleep(0.02)
    sup.stop_all()
    assert proc.restarts == 0 and proc.last_exit == 0


def test_readiness_watch_grace_then_restart_reason():
    from ops.run.supervisor.readiness import ReadinessPolicy, ReadinessWatch

    now, answers = [0.0], []
    watch = ReadinessWatch(
        "http://x/readyz", ReadinessPolicy(1.0, 10.0, 5.0), clock=lambda: now[0], probe_fn=lambda url: answers.pop(0)
    )
    for t, ok, expect in [(0, False, None), (9, False, None), (11, False, "after start")]:
        now[0], answers[:] = t, [ok]
        reason = watch.check()
        assert (reason is None) if expect is None else (expect in reason)
    watch.reset()
    for t, ok, expect in [(20, True, None), (21, False, None), (25, False, None), (27, False, "not ready for")]:
        now[0], answers[:] = t, [ok]
        reason = watch.check()
        assert (reason is None) if expect is None else (expect in reason), (t, reason)


def test_alive_but_unready_process_is_restarted(tmp_path):
    """A child that keeps running but whose readiness URL never answers is killed and started again (the
    vLLM engine that died behind a live HTTP loop used to stay 'running' with /readyz 503 forever)."""
    from ops.run.supervisor.readiness import ReadinessPolicy

    counter = tmp_path / "runs"
    code = f"import time; open({str(counter)!r}, 'a').write('x'); time.sleep(600)"
    spec = ProcessSpec("server", [PY, "-c", code], tmp_path / "server.log", ready_url="http://127.0.0.1:9/readyz")
    sup = Supervisor(
        [spec],
        Backoff(0.05, 0.1, 60.0),
        grace_s=2.0,
        poll_interval_s=0.01,
        readiness=ReadinessPolicy(interval_s=0.05, start_grace_s=0.3, unready_grace_s=0.3),
    )
    sup.start_all()
    try:
        wait_for(lambda: (sup.tick() or True) and counter.exists() and len(counter.read_text()) >= 2, 20)
        assert sup.get("server").restarts >= 1 and sup.is_ready("server") is False
    finally:
        sup.stop_all()


def test_a_process_with_a_nice_runs_that_much_nicer_as_itself(tmp_path):
    """`ops.training_nice`: the learner and the warm start yield the cores to serving. `nice` execs the command, so
    the pid the supervisor signals and waits for is the command's own."""
    code = "import os, sys; print(os.getpid(), os.nice(0), flush=True); sys.stdin.read()"
    nicer = ManagedProcess(ProcessSpec("nicer", [PY, "-c", code], tmp_path / "n.log", nice=7), Backoff())
    plain = ManagedProcess(ProcessSpec("plain", [PY, "-c", code], tmp_path / "p.log"), Backoff())
    base = os.nice(0)
    for proc in (nicer, plain):
        proc.start()
    try:
        for proc, expected in ((nicer, base + 7), (plain, base)):
            log = proc.spec.log_path
            said = lambda: [ln for ln in log.read_text().splitlines() if ln and not ln.startswith("===")]  # noqa: E731
            wait_for(said, 30, f"{proc.spec.name} says its nice")
            pid, nice = map(int, said()[-1].split())
            assert (pid, nice) == (proc.pid, min(expected, 19))
    finally:
        for proc in (nicer, plain):
            proc.proc.kill()
            proc.proc.wait()
