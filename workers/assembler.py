"""`slca assembler`: the stream consumer plus the group sweeper, in one loop.

Plan: connect → ensure the consumer group → loop { poll the stream (enqueue scoring tasks, ack) ; every
`sweep_interval_s`: emit partial groups past the timeout and claims left behind by dead writers, update the
queue gauges ; every `orphan_check_s`: enqueue again entries whose task the broker lost } until SIGTERM/SIGINT.
A stop is checked between rounds, and a round blocks at most `read_block_ms`: the assembler holds no work of its
own (an entry is acknowledged once its task is in the broker; buckets and claims are in Redis), so it leaves
within about that and the next start resumes where the consumer group says.
Redis errors never end the loop: it backs off and resumes where the consumer group says it was (a restarted
Redis with AOF still has the group and its pending entries); once stopping, it gives up on Redis at once.
"""

from __future__ import annotations

import logging
import random
import threading
import time

import redis
from celery import Celery

from workers.backlog import trim_consumed
from workers.consumer import BROKER_ERRORS, StreamConsumer, lag_seconds
from workers.orphans import OrphanFinder
from workers.pipeline import ScoringPipeline
from workers.redisconn import connect, eviction_warning
from workers.settings import WorkerSettings
from slca.early_stop import stop_once

log = logging.getLogger(__name__)


class Sweeper:
    """Timed-out buckets → partial groups (or a lone member → dead letter); stale claims → written."""

    def __init__(self, pipeline: ScoringPipeline, settings: WorkerSettings):
        self.pipeline = pipeline
        self.s = settings

    def sweep(self) -> dict[str, int]:
        counts = {"partial": 0, "lone": 0, "stale": 0}
        groups = self.pipeline.groups
        partial = []
        for status, ident in groups.seal_expired(self.s.group_timeout_s):
            if status == "partial":
                partial.append(ident)
            elif status == "lone":
                counts["lone"] += 1
                self.pipeline.metrics.dead_letters.labels(reason="group_timeout").inc()
        counts["partial"] = self.pipeline.emit(partial).count("emitted")
        # stale: completed by a worker that died before writing, or waiting for room in a full groups stream
        counts["stale"] = self.pipeline.emit(groups.stale_claims(self.s.claim_stale_s)).count("emitted")
        if self.s.trim_consumed_groups:
            stale_ms = int(self.s.trim_stale_group_s * 1000)
            counts["trimmed"] = trim_consumed(self.pipeline.client, self.pipeline.keys.streams.groups, stale_ms)
        return counts

    def update_gauges(self, consumer: StreamConsumer) -> None:
        client, m, streams = self.pipeline.client, self.pipeline.metrics, consumer.streams
        for name in (streams.trajectories, streams.groups, streams.dead):
            m.queue_depth.labels(stream=name).set(client.xlen(name))
        m.queue_depth.labels(stream=self.s.score_queue).set(client.llen(self.s.score_queue))
        m.queue_lag.labels(stream=streams.trajectories).set(lag_seconds(client, consumer.stream, self.s.consumer_group))


def run_assembler(
    settings: WorkerSettings, redis_url: str, prefix: str, app: Celery, stop: threading.Event | None = None
) -> None:
    stop = stop or _stop_on_signals()
    # once stopping, a Redis that went away is not waited for: nothing here holds work that Redis does not
    # (entries are acknowledged only once their task is in the broker; buckets and claims live in Redis)
    client = connect(redis_url, stopped=lambda: stop.is_set())
    if warning := eviction_warning(client):
        log.warning("assembler: %s", warning)
    pipeline = ScoringPipeline(client, settings, prefix)
    consumer = StreamConsumer(client, app, settings, prefix, pipeline.metrics)
    sweeper = Sweeper(pipeline, settings)
    orphans = OrphanFinder(client, pipeline.keys, settings)
    next_sweep, next_orphan_check, backoff = 0.0, time.monotonic() + settings.orphan_check_s, 0.1
    while not stop.is_set():
        try:
            if next_sweep == 0.0:
                consumer.ensure_group()  # also after a reconnect: idempotent
            consumer.poll()
            if time.monotonic() >= next_sweep:
                sweeper.sweep()
                sweeper.update_gauges(consumer)
                next_sweep = time.monotonic() + settings.sweep_interval_s
            if time.monotonic() >= next_orphan_check:
                lost = orphans.check()
                if lost:
                    log.warning("assembler: %d entries lost their scoring task; enqueued again: %s", len(lost), lost)
                    consumer.requeue(lost)
                next_orphan_check = time.monotonic() + settings.orphan_check_s
            backoff = 0.1
        except (redis.RedisError, *BROKER_ERRORS) as exc:
            if stop.is_set():
                log.info("assembler: stopping; %s: %s (unacknowledged entries stay pending)", type(exc).__name__, exc)
                break
            # Redis down or restarting: wait with jittered backoff, then re-read our own pending entries
            log.warning("assembler: %s: %s; retrying in %.1fs", type(exc).__name__, exc, backoff)
            consumer.recover_own, next_sweep = True, 0.0
            stop.wait(backoff * random.uniform(0.5, 1.5))
            backoff = min(backoff * 2, 5.0)
    client.close()
    log.info("assembler: stopped")


def _stop_on_signals() -> threading.Event:
    """Set by the first SIGTERM or SIGINT; later ones are ignored (`slca.early_stop.stop_once`: a second signal
    while the interpreter finalizes would otherwise end a clean stop with status -2 or -15)."""
    stop = threading.Event()
    stop_once(stop.set)
    return stop
