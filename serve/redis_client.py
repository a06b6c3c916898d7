"""serve's Redis clients, with timeouts: without them a Redis that stops answering (a full disk, a paused VM)
holds `/readyz`, the recorder and every request waiting on them, forever.

Two kinds: the command client (recorder, readiness, dashboard reads) times out every read after
`serve.redis_socket_timeout_s`; the weight subscriber waits on a quiet channel for as long as the learner is
quiet, so it gets only the connect timeout and a periodic health check (a read timeout there would only make it
resubscribe every few seconds).
"""

from __future__ import annotations

import redis.asyncio as aioredis


def command_client(url: str, settings) -> aioredis.Redis:
    return aioredis.Redis.from_url(
        url,
        decode_responses=False,
        socket_timeout=settings.redis_socket_timeout_s,
        socket_connect_timeout=settings.redis_connect_timeout_s,
    )


def subscriber_client(url: str, settings) -> aioredis.Redis:
    return aioredis.Redis.from_url(
        url, decode_responses=False, socket_connect_timeout=settings.redis_connect_timeout_s, health_check_interval=30
    )
