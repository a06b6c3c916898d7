"""The whole queue path with real Redis and real Celery worker processes: stream → scoring → groups."""

import threading
import time

import pytest
import redis

from slca.contracts import Streams
from tests.support.trajectories import trajectory
from tests.support.wait import wait_for
from tests.workers.judge_endpoint import Endpoint
from workers.celery_app import make_celery_app
from tests.workers.pipeline_harness import (
    FAST,
    RunningAssembler,
    assert_every_trajectory_once,
    drained,
    feed,
    read_dead,
    read_groups,
    templates,
)
from workers.settings import WorkerSettings

# real worker processes: 1000 entries into 250 groups, a worker killed mid-task, Redis killed mid-run (up to 150 s each)
pytestmark = pytest.mark.slow


@pytest.fixture
def settings() -> WorkerSettings:
    return WorkerSettings(**FAST)


@pytest.fixture
def start_assembler(settings):
    running = []

    def start(url: str, **overrides) -> RunningAssembler:
        running.append(RunningAssembler(settings.model_copy(update=overrides), url))
        return running[-1]

    yield start
    for r in running:
        r.close()


def thousand(builder):
    """240 tasks × 4 (full groups), 10 × 3 (partial after the timeout), 5 lone members, 5 malformed entries."""
    tpl = templates(builder)
    trajs = [trajectory(template=tpl[(t + i) % 3], task_id=f"full-{t}", member=i) for t in range(240) for i in range(4)]
    trajs += [trajectory(template=tpl[i], task_id=f"part-{t}", member=i) for t in range(10) for i in range(3)]
    trajs += [trajectory(template=tpl[0], task_id=f"lone-{t}", member=0) for t in range(5)]
    bad = [
        {b"id": b"bad-0", b"data": b"\xc1not msgpack"},
        {b"id": b"bad-1"},
        {b"data": b"x"},
        {b"id": b"bad-3", b"data": b"\x80"},
        {b"id": b"bad-4", b"data": b"\x91\x01"},
    ]
    return trajs, bad


def test_thousand_trajectories_make_exactly_the_expected_groups(
    builder, settings, redis_url, redis_client, scoring_workers, start_assembler
):
    start_assembler(redis_url, group_timeout_s=2.0)  # short, so that the test sees partial groups
    scoring_workers.start_scoring(settings, concurrency=2)
    trajs, bad = thousand(builder)
    feed(redis_client, trajs + bad)
    started = time.monotonic()
    wait_for(
        lambda: len(read_groups(redis_client)) == 250 and len(read_dead(redis_client)) == 10,
        150,
        "250 groups and 10 dead letters",
    )
    print(f"1000 entries → 250 groups in {time.monotonic() - started:.1f}s (2 worker processes, 2 shared cores)")
    groups, dead = read_groups(redis_client), read_dead(redis_client)
    assert_every_trajectory_once(groups, dead, {t.id for t in trajs})
    assert sorted(g.size for g in groups if g.partial) == [3] * 10
    assert all(g.size == 4 and not g.partial for g in groups if g.task_id.startswith("full-"))
    assert all(len({t.task_id for t in g.trajectories}) == 1 for g in groups)
    assert sum(r.startswith("group_timeout") for r in dead.values()) == 5
    assert sum(r.startswith("invalid_payload") for r in dead.values()) == 5
    # rewards are real: the three templates score differently
    assert len({round(r.exec, 4) for g in groups for r in g.rewards}) == 3

    feed(redis_client, trajs + bad)  # the same input again: no new group, no new dead letter
    wait_for(lambda: drained(redis_client, settings), 120, "the re-fed entries to drain")
    wait_for(lambda: not redis_client.zcard("slca:w:buckets"), 30, "no open bucket")
    assert len(read_groups(redis_client)) == 250 and len(read_dead(redis_client)) == 10


def four_per_task(builder, tasks: int, prefix: str):
    tpl = templates(builder)
    return [
        trajectory(template=tpl[(t + i) % 3], task_id=f"{prefix}-{t}", member=i) for t in range(tasks) for i in range(4)
    ]


def test_worker_killed_mid_task_work_is_redelivered(
    builder, settings, redis_url, redis_client, scoring_workers, start_assembler
):
    """The judge hangs until the worker is killed, so the kill provably lands mid-task; and the worker dies holding
    the restore-sweep lock (as a host that vanishes inside its sweep leaves it), which every other worker's sweep
    must outlast: with kombu's default expiry (300 s) the task would come back long after its group timed out."""
    judge = Endpoint()
    judge.hold.clear()
    try:
        s = settings.model_copy(update={"judge": "openai", "judge_url": judge.url, "task_batch": 4})
        start_assembler(redis_url, task_batch=4)
        trajs = four_per_task(builder, 10, "kill")
        feed(redis_client, trajs)
        first = scoring_workers.start_scoring(s, name="first")
        assert judge.received.wait(timeout=60)  # the first task is inside the judge call
        assert redis_client.hlen("unacked") >= 1  # delivered, not acknowledged
        with make_celery_app(s, redis_url).connection_for_read() as conn:
            lock_s = conn.default_channel.unacked_mutex_expire  # what the dying worker's kombu locks with
        redis_client.set("unacked_mutex", "the-killed-worker", ex=lock_s)
        scoring_workers.kill(first)
        judge.hold.set()
        scoring_workers.start_scoring(s, name="second")
        wait_for(lambda: len(read_groups(redis_client)) == 10, 120, "all 10 groups after the kill")
        wait_for(lambda: drained(redis_client, s), 60, "the redelivered task to be acknowledged")
    finally:
        judge.close()
    groups = read_groups(redis_client)
    assert len(groups) == 10 and not any(g.partial for g in groups) and not read_dead(redis_client)
    assert_every_trajectory_once(groups, {}, {t.id for t in trajs})
    assert all(r.judge == "openai" and r.pref == 0.75 for g in groups for r in g.rewards if not r.omission_penalized)


def test_a_task_lost_between_the_brokers_pop_and_its_unacked_record_is_enqueued_again(
    builder, settings, redis_url, redis_client, scoring_workers, start_assembler
):
    """Kombu takes a task with BRPOP and records it as unacknowledged in a second command: a worker whose
    connection drops in between (Redis killed, a partition) takes the task with it. Emptying the queue before any
    worker runs leaves the same state; the assembler's orphan check must bring the entries back."""
    start_assembler(redis_url)
    trajs = four_per_task(builder, 4, "lost")
    feed(redis_client, trajs)
    wait_for(lambda: redis_client.llen(settings.score_queue) >= 1 and drained_stream(redis_client), 30, "the tasks")
    redis_client.delete(settings.score_queue)
    scoring_workers.start_scoring(settings)
    wait_for(lambda: len(read_groups(redis_client)) == 4, 60, "the 4 groups of the lost tasks")
    groups = read_groups(redis_client)
    assert not any(g.partial for g in groups) and not read_dead(redis_client)
    assert_every_trajectory_once(groups, {}, {t.id for t in trajs})


def where_work_is(client: redis.Redis, settings: WorkerSettings) -> str:
    """Where the entries are, for a failed wait: what is written, what is still queued, held or in the stream."""
    info = client.xinfo_groups(Streams().trajectories)
    return (
        f"{len(read_groups(client))} groups, {len(read_dead(client))} dead letters, "
        f"{client.xlen(Streams().trajectories)} entries still in the stream (consumer group: {info}), "
        f"{client.llen(settings.score_queue)} tasks queued, "
        f"{client.hlen('unacked')} unacked, {client.zcard('slca:w:buckets')} open buckets"
    )


def drained_stream(client: redis.Redis) -> bool:
    """Every entry delivered to the assembler and acknowledged (its task enqueued)."""
    info = client.xinfo_groups(Streams().trajectories)
    return bool(info) and not info[0]["pending"] and not info[0].get("lag")


def test_redis_killed_and_restarted_mid_run_loses_nothing_acknowledged(
    builder, settings, durable_redis_server, durable_redis_client, durable_scoring_workers, start_assembler
):
    """AOF with appendfsync always (`durable_redis_server`): every acknowledged write survives a SIGKILL of Redis."""
    start_assembler(durable_redis_server.url)
    durable_scoring_workers.start_scoring(settings)
    trajs = four_per_task(builder, 60, "crash")
    acknowledged: list[str] = []

    def produce():
        for start in range(0, len(trajs), 8):
            batch = trajs[start : start + 8]
            while True:
                try:
                    feed(durable_redis_client, batch)
                    acknowledged.extend(t.id for t in batch)
                    break
                except redis.RedisError:
                    time.sleep(0.05)  # Redis is restarting: the producer retries what was not acknowledged

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    wait_for(lambda: len(read_groups(durable_redis_client)) >= 5, 60, "the first groups")
    durable_redis_server.restart()  # SIGKILL, then start on the same data dir and port
    producer.join(timeout=60)
    assert len(acknowledged) == len(trajs)
    wait_for(
        lambda: len(read_groups(durable_redis_client)) >= 60,
        150,
        "all 60 groups after the restart",
        detail=lambda: where_work_is(durable_redis_client, settings),
    )
    wait_for(lambda: drained(durable_redis_client, settings), 60, "every task to be acknowledged")
    groups = read_groups(durable_redis_client)
    assert_every_trajectory_once(groups, read_dead(durable_redis_client), set(acknowledged))
    assert len(groups) == 60 and not any(g.partial for g in groups) and not read_dead(durable_redis_client)
