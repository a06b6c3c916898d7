"""Selective rollouts: task outcomes read from a real Redis's `stats:rewards`, and a feed that passes over tasks
whose latest group was uniform without ever stopping."""

import asyncio

import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from ops.common.builtin_tasks import builtin_tasks
from ops.run.feed.feeder import Feeder
from ops.run.feed.metrics import FeedMetrics
from ops.run.feed.selective import TaskOutcomes, TaskSkipper
from ops.settings import OpsSettings
from slca.contracts import Streams
from slca.contracts.queues import STATS_REWARDS
from slca.contracts.stats import RewardStats
from slca.redis_server import free_port
from tests.ops.run.feed.test_feeder import FakeAgentApi, _plan, _serve

PREFIX = "sel"


def _scored(client, task_id: str | None, success: float | None) -> None:
    row = RewardStats(exec=success or 0.0, success=success, policy_version=0, task_id=task_id, ts=0.0)
    client.xadd(Streams(PREFIX).stats(STATS_REWARDS), row.to_fields())


def _outcomes(redis_url: str, task_ids: set[str], group_size: int = 3) -> TaskOutcomes:
    return TaskOutcomes.from_url(redis_url, PREFIX, group_size, task_ids)


def test_outcomes_keep_each_tasks_latest_group_from_the_stream(redis_url, redis_client):
    for success in (0.0, 0.0, 0.0):
        _scored(redis_client, "all-failed", success)
    for success in (1.0, 0.0, 1.0):
        _scored(redis_client, "mixed", success)
    _scored(redis_client, "short", 1.0)  # fewer than a group: not known to be uniform
    _scored(redis_client, "held-out", 0.0)  # not a training task of this feed
    _scored(redis_client, "short", None)  # no ground truth: tells nothing
    stream = Streams(PREFIX).stats(STATS_REWARDS)
    redis_client.xadd(stream, {"schema": "99", "exec": "1"})  # another layout: skipped, the reading goes on

    async def main():
        outcomes = _outcomes(redis_url, {"all-failed", "mixed", "short"})
        try:
            first = await outcomes.read_new()
            uniform = {t: outcomes.uniform(t) for t in ("all-failed", "mixed", "short", "held-out")}
            # the mixed task's next group is all solved: its latest group decides
            for _ in range(3):
                _scored(redis_client, "mixed", 1.0)
            second = await outcomes.read_new()
            return first, uniform, second, outcomes.uniform("mixed"), dict(outcomes.recent)
        finally:
            await outcomes.close()

    first, uniform, second, mixed_now, recent = asyncio.run(main())
    assert first == 10 and second == 3  # the second read starts where the first ended
    assert uniform == {"all-failed": True, "mixed": False, "short": False, "held-out": False}
    assert mixed_now and "held-out" not in recent and list(recent["short"]) == [1.0]


def test_outcomes_survive_an_unreachable_redis_and_say_so_once(caplog):
    async def main():
        outcomes = TaskOutcomes.from_url(f"redis://127.0.0.1:{free_port()}", PREFIX, 3, {"t"})
        try:
            return [await outcomes.read_new() for _ in range(2)], outcomes.failures.failing
        finally:
            await outcomes.close()

    reads, failing = asyncio.run(main())
    assert reads == [0, 0] and failing
    assert sum("cannot read task outcomes" in r.getMessage() for r in caplog.records) == 1


def test_a_skip_probability_of_one_is_refused():
    outcomes = TaskOutcomes(client=None, stream="s", group_size=3, task_ids=set())
    with pytest.raises(ValueError, match="never skipped for good"):
        TaskSkipper(outcomes, 1.0)
    with pytest.raises(ValidationError):
        OpsSettings(feed_skip_uniform_p=1.0)
    assert OpsSettings().feed_skip_uniform_p == 0.0  # shipped off until measured


def _feed(redis_url: str, uniform: set[str], p: float, requests: int):
    tasks = builtin_tasks()

    async def main():
        port = free_port()
        api = FakeAgentApi()
        runner = await _serve(api, port)
        outcomes = _outcomes(redis_url, {t.task_id for t in tasks})
        for task_id in uniform:
            for _ in range(3):
                outcomes.observe(task_id, 0.0)
        registry = CollectorRegistry()
        metrics = FeedMetrics.create(registry)
        try:
            feeder = Feeder(
                _plan(port, concurrency=1, requests=requests), tasks, metrics, skipper=TaskSkipper(outcomes, p)
            )
            report = await feeder.run(asyncio.Event())
        finally:
            await runner.cleanup()
            await outcomes.close()
        return api, report, registry.get_sample_value("slca_feed_skipped_tasks_total")

    return tasks, asyncio.run(main())


def test_the_feed_passes_over_uniform_tasks_and_counts_each_skip(redis_url):
    tasks = builtin_tasks()
    teaching = {tasks[0].task_id, tasks[1].task_id}
    uniform = {t.task_id for t in tasks} - teaching
    tasks, (api, report, skipped) = _feed(redis_url, uniform, 0.99, requests=6)
    sent = [b["task_id"] for b in api.bodies]
    assert len(sent) == 6 and report.skipped == skipped
    # 2 of 28 tasks teach: without skipping they would be 1 request in 14. A uniform one gets through when a draw
    # falls above p, or after an epoch of skips in a row (the teaching tasks early in one epoch and late in the next)
    assert sum(t in teaching for t in sent) >= 4 and report.skipped >= len(uniform)


def test_the_feed_never_stops_when_every_task_is_uniform(redis_url):
    tasks = builtin_tasks()
    tasks, (api, report, skipped) = _feed(redis_url, {t.task_id for t in tasks}, 0.99, requests=4)
    assert len(api.bodies) == 4  # an epoch of skips at most, then the task is sent
    assert report.skipped == skipped and 3 * (len(tasks) - 1) <= report.skipped <= 4 * (len(tasks) - 1)
