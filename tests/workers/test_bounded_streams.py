"""Bounded streams on a real Redis: a trajectory's entry leaves `slca:trajectories` once its group is written (or
it is dead-lettered), whichever path it takes; the dead-letter stream is capped."""

from prometheus_client import CollectorRegistry

from slca.contracts import Streams
from tests.support.trajectories import trajectory
from tests.workers.pipeline_harness import fed, feed, make_pipeline, read_dead, read_groups, templates
from workers.assembler import Sweeper
from workers.celery_app import make_celery_app
from workers.consumer import StreamConsumer
from workers.deadletter import DeadLetters
from workers.keys import Keys
from workers.metrics import WorkerMetrics
from workers.pipeline import ScoringPipeline
from workers.settings import WorkerSettings

TRAJ = Streams().trajectories


def fed_items(client, trajs) -> list[str]:
    """XADD the trajectories as serve does; the entry ids the consumer puts in scoring tasks."""
    return fed(client, trajs)


def test_entries_leave_the_stream_when_their_group_is_written(client, builder, tiny_model_dir):
    p = make_pipeline(client, tiny_model_dir)
    trajs = [trajectory(template=templates(builder)[i % 3], task_id="task-a", member=i) for i in range(4)]
    batch = fed_items(client, trajs)
    assert p.process(batch[:3]) == ["pending"] * 3
    assert client.xlen(TRAJ) == 4  # scored, not yet grouped: still there
    assert p.process(batch[3:]) == ["grouped"]
    assert client.xlen(TRAJ) == 0 and len(read_groups(client)) == 1
    assert not client.keys(p.keys.entry_prefix + "*")
    # the same trajectory added again (a second entry) is a duplicate, and its entry goes at once
    client.delete(TRAJ)
    again = fed_items(client, trajs[:1])
    assert p.process(again) == ["duplicate"] and client.xlen(TRAJ) == 0


def test_lone_late_and_unprocessable_members_leave_the_stream_with_their_dead_letter(client, builder, tiny_model_dir):
    p = make_pipeline(client, tiny_model_dir)
    sweeper = Sweeper(p, p.settings.model_copy(update={"group_timeout_s": 0.0}))
    tpl = templates(builder)[0]
    lone = fed_items(client, [trajectory(template=tpl, task_id="task-lone", member=0)])
    assert p.process(lone) == ["pending"]
    sweeper.sweep()
    assert read_dead(client)["task-lone-r0"].startswith("group_timeout") and client.xlen(TRAJ) == 0

    trajs = [trajectory(template=tpl, task_id="task-b", member=i) for i in range(4)]
    first = fed_items(client, trajs[:2])
    p.process(first)
    sweeper.sweep()  # a partial group of two: their entries go with it
    assert read_groups(client)[0].partial and client.xlen(TRAJ) == 0
    late = fed_items(client, trajs[2:])
    assert p.process(late) == ["dead", "dead"]
    assert client.xlen(TRAJ) == 0

    assert p.process(fed(client, [{b"id": b"broken", b"data": b"\xc1"}])) == ["dead"]
    assert read_dead(client)["broken"].startswith("invalid_payload") and client.xlen(TRAJ) == 0


class InlineConsumer(StreamConsumer):
    """The stream consumer with the Celery hop replaced by a direct call of the pipeline (same task items)."""

    def __init__(self, *args, pipeline: ScoringPipeline, **kwargs):
        super().__init__(*args, **kwargs)
        self.pipeline = pipeline

    def _send(self, producer, batch):
        self.pipeline.process(list(batch))


def test_consumer_to_groups_leaves_an_empty_trajectory_stream(client, redis_url, builder, tiny_model_dir):
    s = WorkerSettings(group_size=4, read_block_ms=10, task_batch=3)
    metrics = WorkerMetrics.create(CollectorRegistry())
    pipeline = ScoringPipeline(client, s, metrics=metrics)
    consumer = InlineConsumer(client, make_celery_app(s, redis_url), s, "slca", metrics, pipeline=pipeline)
    consumer.ensure_group()
    tpl = templates(builder)
    trajs = [trajectory(template=tpl[i % 3], task_id=f"task-{t}", member=i) for t in range(3) for i in range(4)]
    feed(client, trajs)
    client.xadd(TRAJ, {b"id": b"no-data"})
    for _ in range(3):  # our own (empty) history first, then the new entries
        consumer.poll()
    assert len(read_groups(client)) == 3 and read_dead(client)["no-data"].startswith("invalid_payload")
    assert client.xlen(TRAJ) == 0
    (group,) = client.xinfo_groups(TRAJ)
    assert group["pending"] == 0 and group["lag"] == 0  # deleting delivered entries keeps the lag known


def test_dead_letter_stream_is_capped(client, builder, tiny_model_dir):
    dead = DeadLetters(client, Keys(Streams()), ttl_s=60, maxlen=50)
    for i in range(600):
        dead.add(f"e{i}", "invalid_payload: test", TRAJ, b"x")
    # MAXLEN ~ trims whole nodes (100 entries each by default): at most one node over the cap
    assert 50 <= client.xlen(Streams().dead) <= 50 + 100

    client.delete(Streams().dead)
    p = make_pipeline(client, tiny_model_dir, dead_maxlen=20)
    garbage = fed(client, [{b"id": f"bad-{i}".encode(), b"data": b"\xc1"} for i in range(400)])
    assert set(p.process(garbage)) == {"dead"}
    assert client.xlen(Streams().dead) <= 20 + 100
    assert WorkerSettings().dead_maxlen >= 1000


def test_every_writer_of_the_dead_letters_caps_them_at_the_one_named_bound():
    import inspect

    from learner import consumer
    from slca.contracts.queues import DEAD_MAXLEN
    from workers.groups import GroupAssembler

    assert WorkerSettings().dead_maxlen == DEAD_MAXLEN == consumer.DEAD_MAXLEN
    for default in (
        inspect.signature(DeadLetters).parameters["maxlen"],
        inspect.signature(GroupAssembler).parameters["dead_maxlen"],
    ):
        assert default.default == DEAD_MAXLEN


def test_a_redelivered_entry_before_its_group_completes_is_kept_until_then(client, builder, tiny_model_dir):
    p = make_pipeline(client, tiny_model_dir)
    trajs = [trajectory(template=templates(builder)[0], task_id="task-r", member=i) for i in range(4)]
    batch = fed_items(client, trajs)
    p.process(batch[:2])
    assert p.process(batch[:2]) == ["duplicate", "duplicate"]  # the same entries again (a redelivery)
    assert client.xlen(TRAJ) == 4
    p.process(batch[2:])
    assert client.xlen(TRAJ) == 0
