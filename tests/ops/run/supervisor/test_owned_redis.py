"""The Redis `slca up` owns keeps what must stay: it evicts nothing (the exactly-once markers carry TTLs, which
`volatile-lru` evicted first), its memory budget covers the configured bounds, and when it dies it is started again
on its append-only file with everything it acknowledged."""

from __future__ import annotations

import asyncio

import pytest
import redis

from ops.run.supervisor.process import Backoff
from ops.settings import OpsSettings
from sim.cache import ResponseCache
from slca.config import ConfigError, load_config
from slca.contracts import Streams
from slca.redis_server import RedisServer
from workers.keys import Keys


def _markers(client: redis.Redis, keys: Keys, n: int) -> list[str]:
    """The marks group assembly leaves per trajectory (as its scripts write them: SET … EX key_ttl_s)."""
    names = []
    for i in range(n):
        for name in (keys.member(f"t{i}"), keys.reward("v1", f"t{i}"), keys.entry(f"t{i}"), keys.emitted(f"g{i}")):
            client.set(name, b"x" * 200, ex=7 * 86400)
            names.append(name)
    return names


def test_exactly_once_markers_survive_memory_pressure(tmp_path):
    policy = OpsSettings().redis_maxmemory_policy  # what `slca up` runs its Redis with
    with RedisServer(tmp_path / "r", appendonly=False, maxmemory="8mb", maxmemory_policy=policy) as server:
        client = redis.Redis.from_url(server.url)
        markers = _markers(client, Keys(Streams("slca")), 1000)
        cache = ResponseCache(server.url, "slca", 3600, 16_384, max_bytes=1 << 20)

        async def simulator_traffic():
            for i in range(1500):  # ~12 MB of tool responses through an 8 MB Redis
                await cache.set(f"slca:sim:cache:{i}", {"blob": "c" * 8000})
            await cache.close()

        asyncio.run(simulator_traffic())
        refused = 0
        for i in range(3000):  # and then anything else with a TTL, past the bound
            try:
                client.set(f"slca:other:{i}", b"o" * 8000, ex=3600)
            except redis.exceptions.OutOfMemoryError:
                refused += 1
        assert refused > 0  # at the bound, writes fail loudly ...
        assert sum(client.exists(name) for name in markers) == len(markers)  # ... and no marker is gone
        assert int(client.info("stats")["evicted_keys"]) == 0


def test_only_noeviction_is_accepted():
    with pytest.raises(ValueError, match="must not evict"):
        OpsSettings(redis_maxmemory_policy="volatile-lru")
    with pytest.raises(ConfigError, match="redis_maxmemory"):
        load_config(overrides=["ops.redis_maxmemory=lots"]).get(OpsSettings)


def test_the_memory_budget_is_the_sum_of_the_configured_bounds(tmp_path):
    from ops.run.supervisor.redis_budget import owned_maxmemory, redis_budget, trajectory_bytes
    from serve.settings import ServeSettings

    config = load_config(overrides=["workers.max_groups_len=100", "serve.max_stream_bytes=1000000"])
    budget = redis_budget(config)
    one = trajectory_bytes(ServeSettings())
    assert budget.parts["groups"] == 100 * 8 * one and budget.parts["trajectories"] == 1_000_000
    assert budget.total == sum(budget.parts.values())
    assert owned_maxmemory("auto", config) == str(budget.total)
    assert owned_maxmemory("2gb", config) == "2gb" and owned_maxmemory(None, config) is None
    bigger = redis_budget(load_config(overrides=["workers.max_groups_len=200", "serve.max_stream_bytes=1000000"]))
    assert bigger.total - budget.total == 100 * 8 * one


def test_a_killed_redis_is_started_again_with_what_it_acknowledged(tmp_path):
    from ops.run.supervisor.redis_watch import RedisWatch

    now = [0.0]
    server = RedisServer(tmp_path / "r", appendonly=True, appendfsync="everysec", password="pw").start()
    watch = RedisWatch(server, Backoff(1.0, 8.0, 60.0), clock=lambda: now[0])
    try:
        client = redis.Redis.from_url(server.url)
        client.set("slca:w:member:t1", "bucket", ex=3600)  # acknowledged
        first = watch.pid
        server.kill()  # SIGKILL: a crash
        watch.check()
        assert watch.pid is None and watch.restart_at == 1.0  # after the back-off, not in a tight loop
        watch.check()
        assert not server.alive()
        now[0] = 1.0
        watch.check()
        assert server.alive() and watch.pid != first and watch.restarts == 1
        again = redis.Redis.from_url(server.url)  # the same URL: port and password kept
        assert again.get("slca:w:member:t1") == b"bucket" and again.ttl("slca:w:member:t1") > 0
    finally:
        server.kill()
