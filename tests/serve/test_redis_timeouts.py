"""serve's Redis clients give up on a Redis that accepts connections and never answers."""

import asyncio
import socket
import time

import pytest
import redis

from serve.redis_client import command_client, subscriber_client
from serve.settings import ServeSettings

pytestmark = pytest.mark.timed  # stop deadlines and latency bounds: alone, in the serial phase


@pytest.fixture
def stalled_redis():
    """A TCP server that accepts and never replies (a Redis stuck on a full disk, a paused VM)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    finally:
        server.close()


def test_a_stalled_redis_fails_commands_within_the_timeout(stalled_redis):
    settings = ServeSettings(redis_socket_timeout_s=0.3, redis_connect_timeout_s=0.3)

    async def main():
        client = command_client(stalled_redis, settings)
        t0 = time.monotonic()
        with pytest.raises(redis.RedisError):  # before: waited forever
            await asyncio.wait_for(client.ping(), timeout=10)
        elapsed = time.monotonic() - t0
        await client.aclose()
        return elapsed

    assert asyncio.run(main()) < 5


def test_the_subscriber_connects_with_a_timeout_and_no_read_timeout():
    settings = ServeSettings()
    kwargs = subscriber_client("redis://127.0.0.1:1/0", settings).connection_pool.connection_kwargs
    assert kwargs["socket_connect_timeout"] == settings.redis_connect_timeout_s
    assert kwargs.get("socket_timeout") is None  # a quiet weight channel is normal
