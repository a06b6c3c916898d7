import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, CeleryWorkers
from tests.workers.builders import TrajectoryBuilder
from workers.settings import WorkerSettings


class ScoringWorkers(CeleryWorkers):
    """Real scoring workers started as `slca worker` (the shipped entry point: it builds the Celery app from the
    configuration it loads, here the `SLCA_*` environment), killed at teardown."""

    def start_scoring(self, settings: WorkerSettings, concurrency: int = 1, name: str | None = None,
                      timeout: float = 60.0) -> subprocess.Popen:  # fmt: skip
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
def tiny_tokenizer(tiny_model_dir):
    from workers.scoring.extract import load_tokenizer

    return load_tokenizer(str(tiny_model_dir))


@pytest.fixture(scope="session")
def builder(tiny_tokenizer) -> TrajectoryBuilder:
    return TrajectoryBuilder(tiny_tokenizer)


@pytest.fixture(scope="session")
def settings() -> WorkerSettings:
    return WorkerSettings()


@pytest.fixture
def fast_redis(tmp_path):
    """An owned Redis with AOF fsync once a second (the production default): for tests that push volume.
    The `redis_server` fixture's fsync-per-write costs several ms per write on this shared disk."""
    from slca.redis_server import RedisServer

    server = RedisServer(tmp_path / "redis-fast", appendonly=True, appendfsync="everysec").start()
    yield server
    server.kill()


@pytest.fixture
def client(fast_redis):
    """A client of `fast_redis` (the tests of consumers, groups and stream bounds share it)."""
    import redis

    c = redis.Redis.from_url(fast_redis.url)
    yield c
    c.close()


@pytest.fixture
def fast_celery_workers(fast_redis, tmp_path):
    workers = ScoringWorkers(fast_redis.url, tmp_path)
    yield workers
    workers.stop_all()


@pytest.fixture
def scoring_workers(redis_url, tmp_path):
    """`ScoringWorkers` on the `redis_server` fixture (AOF fsync per write: the Redis-restart test)."""
    workers = ScoringWorkers(redis_url, tmp_path)
    yield workers
    workers.stop_all()
