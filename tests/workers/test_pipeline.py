"""The whole queue path with real Redis and real Celery worker processes: stream → scoring → groups."""

import time

import pytest

from tests.workers.pipeline_harness import (
    FAST, RunningAssembler, assert_every_trajectory_once, drained, feed, make_trajectory, read_dead, read_groups,
    templates, wait_until, worker_env,
)  # fmt: skip
from workers.settings import WorkerSettings


@pytest.fixture
def settings(tiny_model_dir) -> WorkerSettings:
    return WorkerSettings(tokenizer=str(tiny_model_dir), **FAST)


@pytest.fixture
def assembler(settings, redis_url):
    running = RunningAssembler(settings, redis_url)
    yield running
    running.close()


def thousand(builder):
    """240 tasks × 4 (full groups), 10 × 3 (partial after the timeout), 5 lone members, 5 malformed entries."""
    tpl = templates(builder)
    trajs = [make_trajectory(tpl[(t + i) % 3], f"full-{t}", i) for t in range(240) for i in range(4)]
    trajs += [make_trajectory(tpl[i], f"part-{t}", i) for t in range(10) for i in range(3)]
    trajs += [make_trajectory(tpl[0], f"lone-{t}", 0) for t in range(5)]
    bad = [{b"id": b"bad-0", b"data": b"\xc1not msgpack"}, {b"id": b"bad-1"}, {b"data": b"x"},
           {b"id": b"bad-3", b"data": b"\x80"}, {b"id": b"bad-4", b"data": b"\x91\x01"}]  # fmt: skip
    return trajs, bad


def test_thousand_trajectories_make_exactly_the_expected_groups(builder, settings, redis_client, celery_workers,
                                                                assembler):  # fmt: skip
    celery_workers.start("workers.celery_app", queues=settings.score_queue, env=worker_env(settings))
    trajs, bad = thousand(builder)
    feed(redis_client, trajs + bad)
    started = time.monotonic()
    wait_until(lambda: len(read_groups(redis_client)) == 250 and len(read_dead(redis_client)) == 10, 150,
               "250 groups and 10 dead letters")  # fmt: skip
    print(f"1000 entries → 250 groups in {time.monotonic() - started:.1f}s (1 worker process, 2 shared cores)")
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
    wait_until(lambda: drained(redis_client, settings), 120, "the re-fed entries to drain")
    wait_until(lambda: not redis_client.zcard("slca:w:buckets"), 30, "no open bucket")
    assert len(read_groups(redis_client)) == 250 and len(read_dead(redis_client)) == 10
