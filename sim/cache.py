"""Redis cache of simulated responses. Key: backend + tool + canonical arguments + episode-state hash.

Why the state hash: the same call may rightly answer differently after a write in the same episode.
A cache failure (Redis down, or full) never fails the call: the response is generated again. A response larger than
`max_value_bytes` (an overlay may copy large caller arguments into it) is not cached.

The cache bounds its own memory (`max_bytes`, `sim.cache_max_bytes`): Redis evicts nothing (the owned Redis runs
`maxmemory-policy noeviction`, ops/settings.py: the pipeline's exactly-once markers carry TTLs too, and an evicting
policy would take them). Each write is one script that charges the entry its approximate size (value, key and the
bookkeeping), forgets entries past their TTL, and deletes the oldest entries until the total fits. The bookkeeping:
`<prefix>:sim:cachebook:index` (entry → time written), `…:sizes` (entry → bytes charged), `…:bytes` (the total).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from sim.schemas import canonical_json, digest

log = logging.getLogger(__name__)
_MISS = object()

ENTRY_OVERHEAD_BYTES = 256
"""Charged per entry on top of its value and three copies of its key (the key, its index and size entries): Redis'
own per-key and per-member overhead, approximately."""
EXPIRED_PER_WRITE = 64
"""Entries past their TTL that one write forgets from the bookkeeping (their keys are gone already)."""

_SET = """
local entry, index, sizes, total = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local value, ttl, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local max_bytes, cost, expired_max = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local function forget(key)
  local size = tonumber(redis.call('HGET', sizes, key) or '0')
  redis.call('DEL', key)
  redis.call('ZREM', index, key)
  redis.call('HDEL', sizes, key)
  return redis.call('DECRBY', total, size)
end
for _, key in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', now - ttl, 'LIMIT', 0, expired_max)) do
  forget(key)
end
if redis.call('HEXISTS', sizes, entry) == 1 then forget(entry) end
redis.call('SET', entry, value, 'EX', ttl)
redis.call('HSET', sizes, entry, cost)
redis.call('ZADD', index, now, entry)
local used = redis.call('INCRBY', total, cost)
while used > max_bytes do
  local oldest = redis.call('ZRANGE', index, 0, 0)
  if #oldest == 0 then break end
  used = forget(oldest[1])
end
return used
"""


class ResponseCache:
    def __init__(
        self,
        redis_url: str,
        prefix: str,
        ttl_s: int,
        max_value_bytes: int = 16_384,
        socket_timeout_s: float = 1.0,
        max_bytes: int = 64 << 20,
    ):
        self.redis_url = redis_url
        self.socket_timeout_s = socket_timeout_s
        """A stalled Redis must not hold a tool call (and the agent turn waiting on it): past this, a miss."""
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.max_value_bytes = max_value_bytes
        self.max_bytes = max_bytes
        """Bound of the whole cache in Redis (approximate bytes): the oldest entries go first."""
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

    def book(self, name: str) -> str:
        """A bookkeeping key of the byte bound (`index`, `sizes`, `bytes`)."""
        return f"{self.prefix}:sim:cachebook:{name}"

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
        cost = len(data) + 3 * len(key.encode()) + ENTRY_OVERHEAD_BYTES
        keys = [key, self.book("index"), self.book("sizes"), self.book("bytes")]
        args = [data, self.ttl_s, time.time(), self.max_bytes, cost, EXPIRED_PER_WRITE]
        try:
            await self.client.eval(_SET, len(keys), *keys, *args)
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
