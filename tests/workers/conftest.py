"""Fixtures of the workers tests: real `slca worker` scoring processes, settings, a client of the owned Redis."""

import os
import subprocess
import sys

import pytest

from tests.support.processes import REPO, CeleryWorkers
from workers.settings import WorkerSettings


class ScoringWorkers(CeleryWorkers):
    """Real scoring workers started as `slca worker` (the shipped entry point: it builds the Celery app from the
    configuration it loads, here the `SLCA_*` environment), killed at teardown."""

    def start_scoring(
        self, settings: WorkerSettings, concurrency: int = 1, name: str | None = None, timeout: float = 60.0
    ) -> subprocess.Popen:
        name = name or f"w{len(self.procs)}"
        config = {f"SLCA_WORKERS__{k.upper()}": str(v) for k, v in settings.model_dump().items() if v is not None}
        env = {**os.environ, "SLCA_REDIS_URL": self.redis_url, "PYTHONPATH": str(REPO), **config}
        cmd = [sys.executable, "-m", "slca", "worker", "--concurrency", str(concurrency), "--name", f"{name}@%h"]
        log = open(self.log_dir / f"celery-{name}.log", "wb")
        proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        self._wait_ready(proc, name, timeout)
        return proc


@pytest.fixture(scope="session")
def settings() -> WorkerSettings:
    return WorkerSettings()


@pytest.fixture
def client(redis_client):
    """The owned Redis's client under the name the consumer, group and stream-bound tests use."""
    return redis_client


@pytest.fixture
def scoring_workers(redis_url, tmp_path):
    """`ScoringWorkers` on the owned Redis (`redis_server`)."""
    workers = ScoringWorkers(redis_url, tmp_path)
    yield workers
    workers.stop_all()


@pytest.fixture
def durable_scoring_workers(durable_redis_url, tmp_path):
    """`ScoringWorkers` on `durable_redis_server` (fsync per write): the Redis-restart test."""
    workers = ScoringWorkers(durable_redis_url, tmp_path)
    yield workers
    workers.stop_all()
