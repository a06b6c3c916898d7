"""A clean stop of supervised children (exit status, stop time, SIGKILL recorded), leader-only stops (a Celery
worker's warm shutdown), an owned Redis out of reach of a terminal's Ctrl-C, and size-rotated child logs."""

import os
import signal
import subprocess
import sys
import time

import pytest
import redis

from ops.run.supervisor import Backoff, ManagedProcess, ProcessSpec, Supervisor
from ops.run.supervisor.logpump import RotatingLog
from ops.run.supervisor.up import stop_table
from tests.support.wait import wait_for

pytestmark = pytest.mark.timed  # stop deadlines and latency bounds: alone, in the serial phase

PY = sys.executable


def test_stop_records_exit_time_and_sigkill(tmp_path):
    ready = "print('RE' + 'ADY', flush=True); time.sleep(300)"  # not the text of argv, which the log's header shows
    polite = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); " + ready
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " + ready
    sup = Supervisor(
        [
            ProcessSpec("polite", [PY, "-c", polite], tmp_path / "polite.log"),
            ProcessSpec("stubborn", [PY, "-c", stubborn], tmp_path / "stubborn.log"),
        ],
        Backoff(0.1, 1.0, 60.0),
        grace_s=1.0,
    )
    sup.start_all()
    wait_for(lambda: all(b"READY" in (tmp_path / f"{n}.log").read_bytes() for n in ("polite", "stubborn")))
    sup.stop_all()
    polite_p, stubborn_p = sup.get("polite"), sup.get("stubborn")
    assert polite_p.last_exit == 0 and not polite_p.killed and polite_p.stop_seconds < 1.0
    assert stubborn_p.last_exit == -signal.SIGKILL and stubborn_p.killed
    assert not sup.clean_stop()
    table = stop_table(sup)
    assert "polite" in table and "NOT a clean stop" in table


def test_leader_only_stop_lets_the_leader_stop_its_children(tmp_path):
    """`stop_group=False` (the Celery worker): the group's other members get no SIGTERM from the supervisor; the
    leader finishes them (a pool child completes its task) and the stop is clean, nothing SIGKILLed."""
    done = tmp_path / "child-done"
    child = f"import time; time.sleep(0.8); open({str(done)!r}, 'w').write('ok')"
    leader = (
        "import signal, subprocess, sys, time\n"
        f"c = subprocess.Popen([sys.executable, '-c', {child!r}])\n"
        "signal.signal(signal.SIGTERM, lambda *_: (c.wait(), sys.exit(0)))\n"
        "print('RE' + 'ADY', flush=True)\n"
        "time.sleep(300)\n"
    )
    spec = ProcessSpec("leader", [PY, "-c", leader], tmp_path / "leader.log", stop_group=False)
    sup = Supervisor([spec], Backoff(0.1, 1.0, 60.0), grace_s=5.0)
    sup.start_all()
    wait_for(lambda: b"READY" in (tmp_path / "leader.log").read_bytes())
    sup.stop_all()
    proc = sup.get("leader")
    assert done.read_text() == "ok"  # a group SIGTERM would have killed the child before it wrote
    assert proc.last_exit == 0 and not proc.killed and sup.clean_stop()


def test_owned_redis_survives_sigint_to_its_owners_process_group(tmp_path):
    """A terminal's Ctrl-C reaches the whole foreground group; the owned redis-server must outlive it, since
    `slca up` stops it last, after its clients (it used to die first, under the learner and the assembler)."""
    code = (
        f"import signal, sys, time; sys.path.insert(0, {str(os.getcwd())!r})\n"
        # a shell's background job starts with SIGINT ignored, and Python then keeps it ignored: restore Ctrl-C
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from pathlib import Path\nfrom slca.redis_server import RedisServer\n"
        f"r = RedisServer(Path({str(tmp_path / 'redis')!r})).start()\n"
        # the URL is printed inside the try: a Ctrl-C that lands right after it (the test sends it as soon as it
        # reads the URL) must reach the handler, not escape between the print and the try (a CI flake)
        "try:\n    print(r.url, flush=True)\n    time.sleep(300)\n"
        "except KeyboardInterrupt:\n    time.sleep(3)\n    r.stop()\n"
    )
    owner = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    try:
        url = owner.stdout.readline().decode().strip()
        client = redis.Redis.from_url(url, socket_timeout=2)
        assert client.ping()
        os.killpg(owner.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        time.sleep(1.0)
        assert owner.poll() is None and client.ping()  # the owner is stopping; its Redis still answers
        assert owner.wait(timeout=20) == 0
    finally:
        if owner.poll() is None:
            owner.kill()


def test_rotating_log_rotates_by_size_and_keeps_backups(tmp_path):
    log = RotatingLog(tmp_path / "x.log", max_bytes=100, backups=2)
    for i in range(10):
        log.write(f"{i:02d}".encode() * 20)  # 40 bytes a write
    log.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["x.log", "x.log.1", "x.log.2"]
    assert all(p.stat().st_size <= 100 for p in tmp_path.iterdir())
    assert oct((tmp_path / "x.log").stat().st_mode & 0o777) == "0o600"
    text = b"".join((tmp_path / n).read_bytes() for n in ["x.log.2", "x.log.1", "x.log"])
    assert text == b"".join(f"{i:02d}".encode() * 20 for i in range(4, 10))  # the oldest two writes rotated away


def test_child_output_rotates_without_loss_or_blocking(tmp_path):
    """A child printing ~1.2 MB through a 256 KiB × 8 rotation: every line arrives, in order, across the files,
    and the child is not held up while the supervisor does nothing (the pump thread drains the pipe)."""
    lines = 20_000
    code = f"import sys\nfor i in range({lines}):\n    sys.stdout.write(f'line {{i:06d}} ' + 'x' * 48 + '\\n')\n"
    spec = ProcessSpec(
        "chatty", [PY, "-c", code], tmp_path / "logs" / "chatty.log", log_max_bytes=256 * 1024, log_backups=8
    )
    proc = ManagedProcess(spec, Backoff())
    t0 = time.monotonic()
    proc.start()
    assert proc.proc.wait(timeout=30) == 0  # nobody ticks meanwhile
    took = time.monotonic() - t0
    assert proc.pump.join(5.0)
    proc.log.close()
    files = sorted((tmp_path / "logs").iterdir(), key=lambda p: -int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0)
    assert len(files) >= 4 and all(p.stat().st_size <= 256 * 1024 for p in files)
    text = b"".join(p.read_bytes() for p in files).decode()
    got = [line.split()[1] for line in text.splitlines() if line.startswith("line ")]
    assert got == [f"{i:06d}" for i in range(lines)]
    assert "=== slca up: starting chatty" in text
    assert took < 20


def test_every_process_slca_up_runs_is_a_service():
    """`slca up`'s children are the services: a stop while one is still starting must be a clean stop for each
    (slca/early_stop.py)."""
    import argparse

    from ops.run.supervisor.plan import PROCESS_KINDS
    from slca.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for kind in PROCESS_KINDS.values():
        assert commands[kind.command].get_default("service") is True, kind.command
