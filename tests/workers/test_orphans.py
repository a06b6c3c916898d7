"""Entries whose scoring task the broker lost (taken by a worker whose connection dropped before kombu recorded it
as unacknowledged) are found by comparing the stream with the queue and the unacknowledged hash, and enqueued again."""

import json

from prometheus_client import CollectorRegistry

from slca.contracts import Streams
from tests.support.trajectories import trajectory
from tests.workers.pipeline_harness import fed, make_pipeline, templates
from workers.celery_app import KOMBU_UNACKED_KEY, make_celery_app, task_entry_ids
from workers.consumer import StreamConsumer
from workers.keys import Keys
from workers.metrics import WorkerMetrics
from workers.orphans import OrphanFinder
from workers.settings import WorkerSettings


def test_only_entries_named_by_no_task_and_in_no_bucket_twice_running_are_enqueued_again(
    client, redis_url, builder, tiny_model_dir
):
    s = WorkerSettings(task_batch=4, read_block_ms=10)
    metrics = WorkerMetrics.create(CollectorRegistry())
    consumer = StreamConsumer(client, make_celery_app(s, redis_url), s, "slca", metrics)
    consumer.ensure_group()
    tpl = templates(builder)

    def enqueue(task_id: str, members: int) -> tuple[list[str], bytes]:
        """Feed a task's members and let the consumer enqueue them: their entry ids and the task message."""
        ids = fed(client, [trajectory(template=tpl[i % 3], task_id=task_id, member=i) for i in range(members)])
        for _ in range(2):  # the first poll reads the consumer's own pending history
            consumer.poll()
        message = client.rpop(s.score_queue)  # taken from the queue as a worker's BRPOP does
        assert sorted(task_entry_ids(message)) == sorted(ids)
        return ids, message

    lost, _ = enqueue("lost", 4)  # the worker's connection dropped before it recorded the task: gone
    held, message = enqueue("held", 4)  # a worker holds it unacknowledged, as kombu records it
    client.hset(KOMBU_UNACKED_KEY, "tag-1", json.dumps([json.loads(message), "", s.score_queue]))
    scored, _ = enqueue("scored", 3)  # its task ran: three members wait in a bucket for a fourth
    assert make_pipeline(client, tiny_model_dir).process(scored) == ["pending"] * 3
    queued, message = enqueue("queued", 4)
    client.lpush(s.score_queue, message)  # still waiting in the queue

    finder = OrphanFinder(client, Keys(Streams()), s)
    assert finder.check() == []  # seen once: it could be a task between the broker's pop and its record
    assert finder.check() == lost
    consumer.requeue(lost)
    assert sorted(i for m in client.lrange(s.score_queue, 0, -1) for i in task_entry_ids(m)) == sorted(lost + queued)
    assert finder.check() == [] and finder.check() == []
    assert metrics.orphans_requeued._value.get() == 4
    assert not set(held) & {i for m in client.lrange(s.score_queue, 0, -1) for i in task_entry_ids(m)}


def test_a_message_that_is_not_a_scoring_task_names_no_entry():
    assert task_entry_ids(b"not json") == []
    assert task_entry_ids(json.dumps({"headers": {"task": "other"}, "body": "W10="}).encode()) == []
    assert task_entry_ids(json.dumps([{"headers": {"task": "workers.score"}, "body": 3}, "", "q"]).encode()) == []
