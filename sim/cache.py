"""Redis cache of simulated responses. Key: backend + tool + canonical arguments + episode-state hash.

Why the state hash: the same call may rightly answer differently after a write in the same episode.
A cache failure (Redis down) never fails the call: the response is generated again. A response larger than
`max_value_bytes` (an overlay may copy large caller arguments into it) is not cached: entries stay small, and
with the TTL the cache's memory stays bounded by traffic × TTL × that bound.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from sim.schemas import canonical_json, digest

log = logging.getLogger(__name__)
_MISS = object()


class ResponseCache:
    def __init__(
        self, redis_url: str, prefix: str, ttl_s: int, max_value_bytes: int = 16_384, socket_timeout_s: float = 1.0
    ):
        self.redis_url = redis_url
        self.socket_timeout_s = socket_timeout_s
        """A stalled Redis must not hold a tool call (and the agent turn waiting on it): past this, a miss."""
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.max_value_bytes = max_value_bytes
        # One client per event loop: asyncio Redis connections belong to the loop that opened them, and a
        # provider may serve several loops (serve's loop, `demonstration()` run from sync code in a thread).
        self._clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @property
    def client(self) -> aioredis.Redis:
        loop = asyncio.get_running_loop()
        if loop not in self._clients:
            self._clients[loop] = aioredis.Redis.from_url(
                self.redis_url, socket_timeout=self.socket_timeout_s, socket_connect_timeout=self.socket_timeout_s
            )
        return self._clients[loop]

    def key(self, backend: str, tool: str, arguments: Any, state_hash: str, schema: Any) -> str:
        return (
            f"{self.prefix}:sim:cache:{backend}:{tool}:"
            + digest(canonical_json(arguments), state_hash, canonical_json(schema))[:32]
        )

    async def get(self, key: str) -> Any:
        try:
            raw = await self.client.get(key)
        except RedisError as exc:
            log.warning("sim cache read failed: %s", exc)
            return _MISS
        return _MISS if raw is None else json.loads(raw)

    async def set(self, key: str, value: Any) -> None:
        data = json.dumps(value, ensure_ascii=False).encode()
        if len(data) > self.max_value_bytes:
            return
        try:
            await self.client.set(key, data, ex=self.ttl_s)
        except RedisError as exc:
            log.warning("sim cache write failed: %s", exc)

    @staticmethod
    def missed(value: Any) -> bool:
        return value is _MISS

    async def close(self) -> None:
        """Close this loop's client (clients of loops already gone were closed with their loop)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
