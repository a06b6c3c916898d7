"""Redis cache of simulated responses. Key: backend + tool + canonical arguments + episode-state hash.

Why the state hash: the same call may rightly answer differently after a write in the same episode.
A cache failure (Redis down) never fails the call: the response is generated again.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from sim.schemas import canonical_json, digest

log = logging.getLogger(__name__)
_MISS = object()


class ResponseCache:
    def __init__(self, redis_url: str, prefix: str, ttl_s: int):
        self.client = aioredis.Redis.from_url(redis_url)
        self.prefix = prefix
        self.ttl_s = ttl_s

    def key(self, backend: str, tool: str, arguments: Any, state_hash: str, schema: Any) -> str:
        return f"{self.prefix}:sim:cache:{backend}:{tool}:" + digest(
            canonical_json(arguments), state_hash, canonical_json(schema)
        )[:32]

    async def get(self, key: str) -> Any:
        try:
            raw = await self.client.get(key)
        except RedisError as exc:
            log.warning("sim cache read failed: %s", exc)
            return _MISS
        return _MISS if raw is None else json.loads(raw)

    async def set(self, key: str, value: Any) -> None:
        try:
            await self.client.set(key, json.dumps(value, ensure_ascii=False), ex=self.ttl_s)
        except RedisError as exc:
            log.warning("sim cache write failed: %s", exc)

    @staticmethod
    def missed(value: Any) -> bool:
        return value is _MISS

    async def close(self) -> None:
        await self.client.aclose()
