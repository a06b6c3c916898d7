"""Redis clients that ride out a restart: commands are retried with jittered exponential backoff.

Every write we retry is idempotent (SET NX, Lua scripts guarded by marker keys, XACK), so a command that
ran but whose reply was lost is harmless when it runs again.
"""

from __future__ import annotations

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

RETRYABLE = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)


def connect(url: str, retries: int = 40, cap_s: float = 2.0) -> redis.Redis:
    """A client retrying for about `retries × cap_s / 2` seconds (≈40 s by default) before raising."""
    retry = Retry(ExponentialWithJitterBackoff(cap=cap_s, base=0.05), retries, supported_errors=RETRYABLE)
    return redis.Redis.from_url(url, retry=retry, retry_on_error=list(RETRYABLE), socket_timeout=30,
                                socket_connect_timeout=5, health_check_interval=10)  # fmt: skip
