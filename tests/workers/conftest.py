import pytest

from tests.workers.builders import TrajectoryBuilder
from workers.settings import WorkerSettings


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from workers.scoring.extract import load_tokenizer

    return load_tokenizer(str(tiny_model_dir))


@pytest.fixture(scope="session")
def builder(tiny_tokenizer) -> TrajectoryBuilder:
    return TrajectoryBuilder(tiny_tokenizer)


@pytest.fixture(scope="session")
def settings(tiny_model_dir) -> WorkerSettings:
    return WorkerSettings(tokenizer=str(tiny_model_dir))


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
    from tests.conftest import CeleryWorkers

    workers = CeleryWorkers(fast_redis.url, tmp_path)
    yield workers
    workers.stop_all()
