"""A running pipeline for tests: real Celery worker processes, the assembler loop in a thread, a feeder."""

from __future__ import annotations

import threading
from collections import Counter

import redis

from slca.contracts import RolloutGroup, Streams, Trajectory, decode_entry, encode_entry
from tests.support.trajectories import TrajectoryBuilder, episodes
from workers.settings import WorkerSettings

FAST = {
    "group_size": 4,
    "visibility_timeout_s": 4.0,
    "restore_interval_s": 1,
    "group_timeout_s": 30.0,
    "claim_idle_ms": 3000,
    "claim_stale_s": 3.0,
    "sweep_interval_s": 0.2,
    "orphan_check_s": 1.0,
    "read_block_ms": 100,
    "retry_backoff_s": 0.2,
    "retry_backoff_max_s": 1.0,
}


class RunningAssembler:
    def __init__(self, settings: WorkerSettings, redis_url: str):
        from workers.assembler import run_assembler
        from workers.celery_app import make_celery_app

        self.stop = threading.Event()
        app = make_celery_app(settings, redis_url)
        self.thread = threading.Thread(
            target=run_assembler, args=(settings, redis_url, "slca", app, self.stop), daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def templates(builder: TrajectoryBuilder) -> list[Trajectory]:
    """Three distinct episodes (good, wrong argument, no call) to vary rewards inside groups; a group's members are
    `trajectory(template=…, task_id=…, member=i)` (tests.support.trajectories)."""
    e = episodes(builder)
    return [e["good"], e["wrong"], e["none"]]


def feed(client: redis.Redis, items: list[Trajectory | dict]) -> None:
    """XADD every item (a trajectory, or raw fields for a malformed entry), pipelined."""
    stream = Streams().trajectories
    pipe = client.pipeline(transaction=False)
    for item in items:
        pipe.xadd(stream, encode_entry(item, id=item.id) if isinstance(item, Trajectory) else item)
    pipe.execute()


def fed(client: redis.Redis, items: list[Trajectory | dict]) -> list[str]:
    """XADD every item as `feed` does; their entry ids, in order: what a scoring task carries."""
    stream = Streams().trajectories
    pipe = client.pipeline(transaction=False)
    for item in items:
        pipe.xadd(stream, encode_entry(item, id=item.id) if isinstance(item, Trajectory) else item)
    return [eid.decode() for eid in pipe.execute()]


def read_groups(client: redis.Redis) -> list[RolloutGroup]:
    return [decode_entry(RolloutGroup, fields) for _id, fields in client.xrange(Streams().groups)]


def read_dead(client: redis.Redis) -> dict[str, str]:
    return {f[b"id"].decode(): f[b"reason"].decode() for _id, f in client.xrange(Streams().dead)}


def drained(client: redis.Redis, settings: WorkerSettings) -> bool:
    """Every stream entry delivered and acked, no task queued or held unacked by a worker."""
    streams = Streams()
    groups = client.xinfo_groups(streams.trajectories)
    if not groups or groups[0]["pending"] or groups[0].get("lag"):
        return False
    return client.llen(settings.score_queue) == 0 and client.hlen("unacked") == 0


def assert_every_trajectory_once(groups: list[RolloutGroup], dead: dict[str, str], expected_ids: set[str]) -> None:
    counts = Counter(t.id for g in groups for t in g.trajectories)
    assert all(c == 1 for c in counts.values()), [k for k, c in counts.items() if c > 1][:5]
    grouped = set(counts)
    assert not grouped & set(dead), sorted(grouped & set(dead))[:5]
    assert grouped | set(dead) >= expected_ids, sorted(expected_ids - grouped - set(dead))[:5]
    assert all(reason for reason in dead.values())


def make_pipeline(client, tiny_model_dir, **overrides):
    """A scoring pipeline on `client`, groups of 4, its own metrics registry."""
    from prometheus_client import CollectorRegistry

    from workers.metrics import WorkerMetrics
    from workers.pipeline import ScoringPipeline

    s = WorkerSettings(group_size=4, **overrides)
    return ScoringPipeline(client, s, metrics=WorkerMetrics.create(CollectorRegistry()))
