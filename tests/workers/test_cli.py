"""Smoke run of the shipped entry points: `slca worker` and `slca assembler` as processes, metrics endpoints."""

import os
import signal
import subprocess
import sys
import urllib.request

import pytest
import redis

from slca.redis_server import free_port
from tests.support.trajectories import trajectory
from tests.support.wait import wait_for
from tests.workers.pipeline_harness import feed, read_groups, templates

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def metrics(port: int) -> str:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except OSError:
        return ""


def sample(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture
def processes():
    procs = []
    yield procs
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def start(args, env, log, procs):
    p = subprocess.Popen(
        [sys.executable, "-m", "slca", *args],
        env=env,
        cwd=REPO,
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    procs.append(p)
    return p


def test_worker_and_assembler_commands_score_a_group_and_export_metrics(redis_url, builder, tmp_path, processes):
    worker_port, assembler_port = free_port(), free_port()
    env = {
        **os.environ,
        "PYTHONPATH": REPO,
        "SLCA_REDIS_URL": redis_url,
        "SLCA_WORKERS__SWEEP_INTERVAL_S": "0.2",
        "SLCA_WORKERS__GROUP_SIZE": "4",
    }
    worker = start(
        ["worker", "--concurrency", "1"],
        {**env, "SLCA_WORKERS__METRICS_PORT": str(worker_port)},
        tmp_path / "worker.log",
        processes,
    )
    assembler = start(
        ["assembler"], {**env, "SLCA_WORKERS__METRICS_PORT": str(assembler_port)}, tmp_path / "assembler.log", processes
    )
    client = redis.Redis.from_url(redis_url)
    trajs = [trajectory(template=templates(builder)[i % 3], task_id="cli-task", member=i) for i in range(4)]
    feed(client, trajs)
    wait_for(lambda: len(read_groups(client)) == 1, 90, "one group through the CLI processes")
    wait_for(lambda: sample(metrics(worker_port), "slca_scored_total") == 4.0, 30, "worker metrics")
    text = metrics(assembler_port)
    wait_for(
        lambda: sample(metrics(assembler_port), 'slca_queue_depth{stream="slca:groups"}') == 1.0,
        30,
        "assembler queue-depth gauge",
    )
    assert "slca_queue_lag_seconds" in text and "slca_intake_paused" in text
    assert sample(metrics(worker_port), 'slca_groups_emitted_total{partial="false"}') == 1.0
    for proc in (assembler, worker):
        os.killpg(proc.pid, signal.SIGTERM)
    assert assembler.wait(timeout=30) == 0
    worker.wait(timeout=30)
    client.close()


def test_bench_queue_smoke(tiny_model_dir, tmp_path):
    out = tmp_path / "bench.json"
    env = {
        **os.environ,
        "PYTHONPATH": REPO,
        "SLCA_WORKERS__TOKENIZER": str(tiny_model_dir),
        "SLCA_WORKERS__GROUP_SIZE": "4",
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slca",
            "bench",
            "queue",
            "--trajectories",
            "40",
            "--stream-entries",
            "320",
            "--out",
            str(out),
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "redis-benchmark XADD" in proc.stdout and "end to end" in proc.stdout
    import json

    figures = json.loads(out.read_text())
    assert figures["end_to_end"]["groups"] == 10 and figures["end_to_end"]["trajectories_per_s"] > 0
    assert figures["redis_benchmark_xadd_per_s"] > 0 and figures["our_readgroup_ack_per_s"] > 0
