"""The stream consumer alone: dead letters for bad entries and for entries that keep failing to enqueue."""

from prometheus_client import CollectorRegistry

import redis

from slca.contracts import Streams, encode_entry
from slca.redis_server import RedisServer
from tests.support.trajectories import trajectory
from tests.workers.pipeline_harness import read_dead, templates
from workers.celery_app import make_celery_app
from workers.consumer import StreamConsumer
from workers.metrics import WorkerMetrics
from workers.settings import WorkerSettings


def consumer_for(client, broker_url: str, **overrides) -> StreamConsumer:
    s = WorkerSettings(claim_idle_ms=1, max_deliveries=2, read_block_ms=10, **overrides)
    c = StreamConsumer(client, make_celery_app(s, broker_url), s, "slca", WorkerMetrics.create(CollectorRegistry()))
    c.ensure_group()
    return c


def task_args(message: bytes) -> list:
    """The positional arguments of a Celery task message as the Redis transport stores it (JSON body, base64)."""
    import base64
    import json

    envelope = json.loads(message)
    return json.loads(base64.b64decode(envelope["body"]))[0]


def test_entries_are_enqueued_in_batches_and_acknowledged(client, redis_url, builder):
    c = consumer_for(client, redis_url, task_batch=4)
    trajs = [trajectory(template=templates(builder)[0], task_id="t", member=i) for i in range(10)]
    for t in trajs:
        client.xadd(Streams().trajectories, encode_entry(t, id=t.id))
    client.xadd(Streams().trajectories, {b"id": b"no-data"})
    for _ in range(3):  # the first poll reads our own pending history (empty), the next the new entries
        c.poll()
    assert client.llen(c.s.score_queue) == 3  # 10 entries in tasks of ≤ 4
    # a task carries stream entry ids (the worker reads the trajectories by id), not the payloads
    entry_ids = [eid.decode() for eid, f in client.xrange(Streams().trajectories) if f.get(b"data")]
    carried = [i for m in client.lrange(c.s.score_queue, 0, -1) for i in task_args(m)[0]]
    assert sorted(carried) == sorted(entry_ids)
    assert client.xpending(Streams().trajectories, c.s.consumer_group)["pending"] == 0
    assert read_dead(client)["no-data"].startswith("invalid_payload")


def test_entry_that_cannot_be_enqueued_goes_dead_after_max_deliveries(client, builder, tmp_path):
    # the broker refuses every write (full, no eviction): every enqueue fails at once. (A broker that is down fails
    # the same way after redis-py's connection retries, ~6 s an attempt.)
    broker = RedisServer(tmp_path / "broker", maxmemory_policy="noeviction").start()
    try:
        redis.Redis.from_url(broker.url).config_set("maxmemory", 1)
        _goes_dead_after_max_deliveries(client, builder, broker.url)
    finally:
        broker.kill()


def _goes_dead_after_max_deliveries(client, builder, broker_url: str) -> None:
    c = consumer_for(client, broker_url)
    t = trajectory(template=templates(builder)[0], task_id="t", member=0)
    client.xadd(Streams().trajectories, encode_entry(t, id=t.id))
    failures = 0
    for _ in range(10):
        try:
            c.poll()
        except Exception:  # noqa: BLE001 — the broker error the assembler loop backs off from
            failures += 1
        if read_dead(client):
            break
    assert failures >= 2
    assert read_dead(client)[t.id].startswith("max_deliveries")
    assert client.xpending(Streams().trajectories, c.s.consumer_group)["pending"] == 0
