"""Fixtures of the serve tests: a real `slca serve` process on the tiny model (hf engine) with a real Redis, shared
by the session (helpers: tests.support.serve). Covers tests/serve/engines/ as well."""

from __future__ import annotations

import pytest
import redis

from slca.redis_server import RedisServer
from tests.support.serve import ServerProcess


@pytest.fixture(scope="session")
def serve_redis(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("serve-redis"), appendonly=False).start()
    yield server
    server.kill()


@pytest.fixture(scope="session")
def hf_server(serve_redis, tiny_model_dir, tmp_path_factory):
    """One shared server for the read-mostly tests (its weight version never changes)."""
    server = ServerProcess(
        serve_redis.url,
        tiny_model_dir,
        tmp_path_factory.mktemp("serve") / "server.log",
        "weights.follow=false",
    )
    try:
        yield server.wait_ready()
    finally:
        server.stop()


@pytest.fixture
def rclient(serve_redis):
    client = redis.Redis.from_url(serve_redis.url)
    yield client
    client.close()
