"""Shared fixtures: an owned real Redis per test, real Celery worker processes, the tiny model.

No test touches the machine's shared Redis on 6379: every Redis here is a `redis-server` on a free
port with its own temp dir (AOF on), killed afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from slca.config import load_config
from slca.redis_server import RedisServer

REPO = Path(__file__).resolve().parent.parent
# the same cache `slca model fetch` wrote to (common.cache_dir: $SLCA_CACHE_DIR, else $XDG_CACHE_HOME/slca)
CACHE_DIR = Path(load_config().common.cache_dir)


@pytest.fixture
def redis_server(tmp_path):
    """A real redis-server owned by this test (AOF, appendfsync always so a SIGKILL loses nothing acked)."""
    server = RedisServer(tmp_path / "redis", appendonly=True, appendfsync="always").start()
    yield server
    server.kill()


@pytest.fixture
def redis_url(redis_server) -> str:
    return redis_server.url


@pytest.fixture
def redis_client(redis_url):
    client = redis.Redis.from_url(redis_url, decode_responses=False)
    yield client
    client.close()


class CeleryWorkers:
    """Starts real `celery worker` processes against an owned Redis; kills them at teardown."""

    def __init__(self, redis_url: str, log_dir: Path):
        self.redis_url = redis_url
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []

    def start(self, app: str, queues: str | None = None, concurrency: int = 1, env: dict | None = None,
              timeout: float = 60.0, name: str | None = None) -> subprocess.Popen:  # fmt: skip
        name = name or f"w{len(self.procs)}"
        cmd = [sys.executable, "-m", "celery", "-A", app, "worker", "--pool", "prefork", "-c", str(concurrency),
               "--without-gossip", "--without-mingle", "--loglevel", "INFO", "-n", f"{name}@%h"]  # fmt: skip
        if queues:
            cmd += ["-Q", queues]
        full_env = {**os.environ, "SLCA_REDIS_URL": self.redis_url, "PYTHONPATH": str(REPO), **(env or {})}
        log = open(self.log_dir / f"celery-{name}.log", "wb")
        proc = subprocess.Popen(cmd, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        self._wait_ready(proc, name, timeout)
        return proc

    def _wait_ready(self, proc, name: str, timeout: float) -> None:
        from celery import Celery

        probe = Celery(broker=self.redis_url, backend=self.redis_url)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"celery worker {name} exited: see {self.log_dir}/celery-{name}.log")
                replies = probe.control.ping(timeout=0.5) or []
                if any(name in key for reply in replies for key in reply):
                    return
            raise TimeoutError(f"celery worker {name} not ready after {timeout}s")
        finally:
            probe.close()

    @staticmethod
    def kill(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        """Kill the worker's whole process group (main process and its prefork children)."""
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=30)

    def stop_all(self) -> None:
        for proc in self.procs:
            try:
                self.kill(proc, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def celery_workers(redis_url, tmp_path):
    workers = CeleryWorkers(redis_url, tmp_path)
    yield workers
    workers.stop_all()


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The embedded model (SmolLM2-135M-Instruct); `make test` fetches it before pytest starts."""
    from slca.models.fetch import fetch_embedded

    return fetch_embedded(CACHE_DIR)


@pytest.fixture(scope="session")
def tiny_model_dir(embedded_model_dir) -> Path:
    """A tiny random model with the embedded model's architecture and tokenizer."""
    from slca.models.tiny import build_tiny

    return build_tiny(embedded_model_dir, CACHE_DIR)
