"""The assembler's stop path: a stop event ends its loop within a second even while it blocks on XREADGROUP,
leaves nothing it took behind (each entry is acknowledged only with its task in the broker), gives up at once
on a Redis that vanished while stopping, and `slca assembler` exits 0 on SIGINT and SIGTERM."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import redis

from slca.contracts import Streams
from tests.support.processes import REPO
from tests.support.trajectories import trajectory
from tests.support.wait import wait_for
from tests.workers.pipeline_harness import fed, templates
from workers.settings import WorkerSettings

pytestmark = pytest.mark.timed  # stop deadlines and latency bounds: alone, in the serial phase


def start_assembler(redis_url: str, settings: WorkerSettings) -> tuple[threading.Event, threading.Thread]:
    from workers.assembler import run_assembler
    from workers.celery_app import make_celery_app

    stop = threading.Event()
    app = make_celery_app(settings, redis_url)
    thread = threading.Thread(target=run_assembler, args=(settings, redis_url, "slca", app, stop), daemon=True)
    thread.start()
    return stop, thread


def group_ready(client: redis.Redis, settings: WorkerSettings) -> bool:
    try:
        return any(g["name"] == settings.consumer_group.encode() for g in client.xinfo_groups(Streams().trajectories))
    except redis.ResponseError:
        return False


def test_stop_while_blocked_on_a_read_ends_within_a_second_and_loses_nothing(redis_url, redis_client, builder):
    settings = WorkerSettings(group_size=4)  # the default read_block_ms: the loop blocks in XREADGROUP
    stop, thread = start_assembler(redis_url, settings)
    wait_for(lambda: group_ready(redis_client, settings))
    # half a group: its members become scoring tasks; no worker runs, so they are in the broker's queue
    members = [trajectory(template=t, task_id="task-a", member=i) for i, t in enumerate(templates(builder)[:2])]
    ids = fed(redis_client, members)
    wait_for(lambda: redis_client.llen(settings.score_queue) >= 1)
    time.sleep(0.5)  # idle again: blocked on the next read
    t0 = time.monotonic()
    stop.set()
    thread.join(timeout=5)
    took = time.monotonic() - t0
    assert not thread.is_alive() and took < 1.0, took
    # every entry is either in a task in the broker or still pending for the next start: none dropped
    queued = b"".join(redis_client.lrange(settings.score_queue, 0, -1))
    entries = redis_client.xpending_range(Streams().trajectories, settings.consumer_group, "-", "+", 100)
    pending = {e["message_id"].decode() for e in entries}
    assert all(i.encode() in queued or i in pending for i in ids)
    assert redis_client.xlen(Streams().trajectories) == len(ids)  # entries leave the stream only once grouped


def test_stop_after_redis_vanished_does_not_wait_out_the_retries(redis_server, redis_client):
    settings = WorkerSettings(group_size=4)
    stop, thread = start_assembler(redis_server.url, settings)
    wait_for(lambda: group_ready(redis_client, settings))
    redis_server.kill()  # the client now retries for ≈40 s before it would raise
    time.sleep(1.0)
    t0 = time.monotonic()
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive() and time.monotonic() - t0 < 3.0  # at most one back-off sleep (cap 2 s)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_slca_assembler_exits_0_on_sigint_and_sigterm(redis_url, redis_client, tmp_path, sig):
    settings = WorkerSettings()
    env = {**os.environ, "PYTHONPATH": str(REPO), "SLCA_REDIS_URL": redis_url, "SLCA_WORKERS__METRICS_PORT": "0"}
    log = tmp_path / "assembler.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "slca", "assembler"],
        env=env,
        cwd=tmp_path,
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(lambda: group_ready(redis_client, settings) or proc.poll() is not None, 60)
        assert proc.poll() is None, log.read_text()
        time.sleep(0.5)
        t0 = time.monotonic()
        os.killpg(proc.pid, sig)  # the whole group, as a terminal's Ctrl-C would
        rc = proc.wait(timeout=10)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert rc == 0 and "Traceback" not in text, text[-2000:]
    assert took < 2.0, took
