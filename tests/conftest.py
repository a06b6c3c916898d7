"""Shared fixtures: an owned real Redis per test, real Celery worker processes, the tiny model and its tokenizer,
the trajectory builder. (Helpers that test modules import live in tests/support, never in a conftest.)

No test touches the machine's shared Redis on 6379: every Redis here is a `redis-server` on a free
port with its own temp dir (AOF on), killed afterwards. `redis_server` fsyncs its AOF once a second (the
production default); `durable_redis_server` fsyncs every write, for the tests that SIGKILL Redis and count what
survived — fsync per write costs several ms a write on a shared disk, which the other tests need not pay.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from slca.config import load_config
from slca.redis_server import RedisServer
from tests.support.processes import CeleryWorkers
from tests.support.trajectories import TrajectoryBuilder

# the same cache `slca model fetch` wrote to (common.cache_dir: $SLCA_CACHE_DIR, else $XDG_CACHE_HOME/slca)
CACHE_DIR = Path(load_config().common.cache_dir)


def pytest_collection_modifyitems(config, items):
    # `timed` tests (a tight latency bound, a stop deadline: a test on the other core would make them flaky) run
    # alone, in the serial phase of scripts/test.sh. `slow` ones (whole systems, real vLLM engines) run in the
    # parallel phase: their waits are bounded by events with generous timeouts, and beside each other on one torch
    # thread each they take 390 s where one at a time took 469 s (2 cores). Mark the test that times, not its
    # module: the module's other tests run in parallel.
    for item in items:
        if item.get_closest_marker("timed"):
            item.add_marker(pytest.mark.serial)
    # Files with a slow test first (a stable sort: each file's tests stay together and in order). xdist hands out
    # files in this order (scripts/test.sh turns off its reordering by test count, which sent the one-test whole-
    # system files last): the long files start early and the short ones fill the gaps, instead of a minute-long
    # file running alone at the end while the other worker idles.
    heavy = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in heavy)
    _list_serial_files(items)


def _list_serial_files(items) -> None:
    """Where scripts/test.sh asks (SLCA_SERIAL_FILES), the files that hold a `serial` test, one per line: the
    serial phase collects those (14 today) instead of all ~150 (each collection imports torch and transformers
    again, ~10 s of a 2-core machine). Written once, by the first xdist worker (or a run without xdist)."""
    import os

    target = os.environ.get("SLCA_SERIAL_FILES")
    if not target or os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return
    files = sorted({str(item.path) for item in items if item.get_closest_marker("serial")})
    Path(target).write_text("".join(f"{f}\n" for f in files))


@pytest.fixture
def redis_server(tmp_path):
    """A real redis-server owned by this test (AOF, appendfsync everysec: a SIGKILL of Redis may lose the last
    second; tests that kill Redis and check what survived use `durable_redis_server`)."""
    server = RedisServer(tmp_path / "redis", appendonly=True, appendfsync="everysec").start()
    yield server
    server.kill()


@pytest.fixture
def durable_redis_server(tmp_path):
    """A real redis-server owned by this test with appendfsync always: a SIGKILL loses nothing it acknowledged.
    Only for the crash tests (Redis killed and restarted on the same data dir)."""
    server = RedisServer(tmp_path / "redis-durable", appendonly=True, appendfsync="always").start()
    yield server
    server.kill()


@pytest.fixture
def durable_redis_url(durable_redis_server) -> str:
    return durable_redis_server.url


def _client_of(url: str):
    client = redis.Redis.from_url(url, decode_responses=False)
    yield client
    client.close()


@pytest.fixture
def durable_redis_client(durable_redis_url):
    yield from _client_of(durable_redis_url)


@pytest.fixture
def redis_url(redis_server) -> str:
    return redis_server.url


@pytest.fixture
def redis_client(redis_url):
    yield from _client_of(redis_url)


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


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    """The tiny model's tokenizer (the embedded model's), as the workers load it."""
    from workers.scoring.extract import load_tokenizer

    return load_tokenizer(str(tiny_model_dir))


@pytest.fixture(scope="session")
def hf_tokenizer(tiny_model_dir):
    """The tiny model's tokenizer as serve and the learner load it (transformers' `AutoTokenizer`: the chat template,
    incremental decode)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def builder(tiny_tokenizer) -> TrajectoryBuilder:
    """Chat-turn trajectories with the tiny model's real token ids (tests.support.trajectories)."""
    return TrajectoryBuilder(tiny_tokenizer)
