"""Redis clients that ride out a restart: commands are retried with jittered exponential backoff.

Every write we retry is idempotent (SET NX, Lua scripts guarded by marker keys, XACK), so a command that
ran but whose reply was lost is harmless when it runs again.
"""

from __future__ import annotations

from collections.abc import Callable

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

RETRYABLE = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)


class StoppableRetry(Retry):
    """Retries only while `stopped()` says no: a process asked to stop gives up on an unreachable Redis at once
    (after at most one back-off sleep) instead of retrying for ≈40 s and being SIGKILLed."""

    def __init__(self, stopped: Callable[[], bool], *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stopped = stopped  # a plain function: redis-py deep-copies its Retry, and an Event cannot be copied

    def call_with_retry(self, do, fail, is_retryable=None, with_failure_count=False):
        def retryable(error: Exception) -> bool:
            return not self.stopped() and (is_retryable is None or is_retryable(error))

        return super().call_with_retry(do, fail, retryable, with_failure_count)


def connect(url: str, retries: int = 40, cap_s: float = 2.0, stopped: Callable[[], bool] | None = None) -> redis.Redis:
    """A client retrying for about `retries × cap_s / 2` seconds (≈40 s by default) before raising; with
    `stopped`, no retry once it returns True."""
    backoff = ExponentialWithJitterBackoff(cap=cap_s, base=0.05)
    if stopped is None:
        retry = Retry(backoff, retries, supported_errors=RETRYABLE)
    else:
        retry = StoppableRetry(stopped, backoff, retries, supported_errors=RETRYABLE)
    return redis.Redis.from_url(
        url,
        retry=retry,
        retry_on_error=list(RETRYABLE),
        socket_timeout=30,
        socket_connect_timeout=5,
        health_check_interval=10,
    )


def eviction_warning(client: redis.Redis) -> str | None:
    """What is wrong when this Redis may evict keys (a memory bound with a policy other than `noeviction`): the
    exactly-once marks carry TTLs (workers/keys.py), so they are what `volatile-*` policies evict first. None when it
    cannot (or when CONFIG is not allowed, as on some managed Redis, or Redis is not reachable: nothing to say)."""
    try:
        config = client.config_get("maxmemory*")
    except redis.RedisError:
        return None
    policy, bound = config.get("maxmemory-policy", "noeviction"), int(config.get("maxmemory", 0) or 0)
    if policy == "noeviction" or bound == 0:
        return None
    return (
        f"Redis evicts at its memory bound (maxmemory-policy {policy}): the exactly-once marks of group assembly "
        "carry TTLs and may be evicted, after which a redelivered trajectory is scored and grouped twice; set "
        "maxmemory-policy noeviction (slca up's own Redis runs so)"
    )
