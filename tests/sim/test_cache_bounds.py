"""The response cache stays small and always expires; an owned Redis at its memory bound evicts cache entries,
never the pipeline's streams (ops.redis_maxmemory_policy = volatile-lru)."""

import asyncio

import redis

from sim.cache import ResponseCache
from sim.settings import SimSettings
from slca.redis_server import RedisServer


def test_cache_entries_are_small_and_expire(redis_url):
    settings = SimSettings()
    assert settings.cache_max_value_bytes <= 16_384 and settings.cache_ttl_s <= 3600
    cache = ResponseCache(redis_url, "t", settings.cache_ttl_s, settings.cache_max_value_bytes)

    async def main():
        await cache.set("t:small", {"ok": "x" * 100})
        await cache.set("t:big", {"blob": "x" * 20_000})  # an overlay that copied large caller arguments
        await cache.close()

    asyncio.run(main())
    client = redis.Redis.from_url(redis_url)
    assert client.exists("t:big") == 0
    assert 0 < client.ttl("t:small") <= settings.cache_ttl_s


def test_at_the_memory_bound_cache_entries_go_and_streams_stay(tmp_path):
    with RedisServer(tmp_path / "r", appendonly=False, password="pw", maxmemory="4mb") as server:
        client = redis.Redis.from_url(server.url)
        for i in range(200):  # the pipeline's data: no TTL
            client.xadd("slca:trajectories", {"payload": b"t" * 1000, "i": i})
        value = b"c" * 8000
        for i in range(2000):  # ~16 MB of cache entries through a 4 MB Redis
            client.set(f"slca:sim:cache:{i}", value, ex=3600)
        assert client.xlen("slca:trajectories") == 200
        assert client.dbsize() - 1 < 2000  # cache entries were evicted to make room
        assert int(client.info("stats")["evicted_keys"]) > 0
