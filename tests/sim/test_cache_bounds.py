"""The response cache stays small, always expires and bounds its own bytes: Redis evicts nothing
(ops.redis_maxmemory_policy = noeviction), so the pipeline's markers, which carry TTLs, stay."""

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


def test_the_cache_bounds_its_own_bytes_and_redis_evicts_nothing(tmp_path):
    """Redis must not evict (the exactly-once markers carry TTLs): the cache keeps itself under `max_bytes`,
    oldest entries first, inside a Redis far larger than it that runs `noeviction`."""
    with RedisServer(tmp_path / "r", appendonly=False, password="pw", maxmemory="64mb") as server:
        cache = ResponseCache(server.url, "slca", 3600, 16_384, max_bytes=1 << 20)
        value = {"blob": "c" * 8000}

        async def main():
            for i in range(500):  # ~4 MB of responses through a 1 MiB cache
                await cache.set(f"slca:sim:cache:{i}", value)
            newest = await cache.get("slca:sim:cache:499")
            await cache.close()
            return newest

        assert asyncio.run(main()) == value
        client = redis.Redis.from_url(server.url)
        entries = client.keys("slca:sim:cache:*")
        charged = int(client.get(cache.book("bytes")))
        assert charged <= 1 << 20 and 100 <= len(entries) <= 130  # ~8.3 kB charged each
        assert client.exists("slca:sim:cache:0") == 0  # the oldest went first
        assert client.zcard(cache.book("index")) == client.hlen(cache.book("sizes")) == len(entries)
        assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
        assert int(client.info("stats")["evicted_keys"]) == 0
