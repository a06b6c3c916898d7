"""Stream consumer: `slca:trajectories` (consumer group) → Celery scoring tasks carrying entry ids → XACK.

At-least-once, never lost: an entry is acknowledged only after its task is in the broker (an LPUSH that
returned; with AOF it is on disk), so a crash between the two redelivers the entry and the idempotent task
absorbs the duplicate. Entries left pending by a dead consumer are taken over with XAUTOCLAIM once idle past
`claim_idle_ms`; an entry delivered more than `max_deliveries` times, or one without a payload, goes to
`slca:dead` with the reason. Intake pauses (and a gauge says so) while downstream is full.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time

import redis
from celery import Celery
from kombu.exceptions import OperationalError

from slca.contracts import Streams
from workers.backlog import backlog
from workers.celery_app import SCORE_TASK
from workers.deadletter import DeadLetters, reason_kind
from workers.keys import Keys
from workers.metrics import WorkerMetrics
from workers.settings import WorkerSettings

log = logging.getLogger(__name__)
BROKER_ERRORS = (OperationalError, redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, OSError)


class StreamConsumer:
    def __init__(self, client: redis.Redis, app: Celery, settings: WorkerSettings, prefix: str, metrics: WorkerMetrics):
        self.client = client
        self.app = app
        self.s = settings
        self.streams = Streams(prefix)
        self.metrics = metrics
        self.dead = DeadLetters(client, Keys(self.streams), settings.key_ttl_s, settings.dead_maxlen)
        self.name = settings.consumer_name or f"{socket.gethostname()}-{os.getpid()}"
        self.recover_own = True  # first read: our own pending entries (delivered before a restart, not acked)

    @property
    def stream(self) -> str:
        return self.streams.trajectories

    def ensure_group(self) -> None:
        try:
            self.client.xgroup_create(self.stream, self.s.consumer_group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def downstream_full(self) -> bool:
        full = (
            backlog(self.client, self.streams.groups, int(self.s.trim_stale_group_s * 1000)) >= self.s.max_groups_len
            or self.client.llen(self.s.score_queue) >= self.s.max_inflight
        )
        self.metrics.intake_paused.set(int(full))
        return full

    def poll(self) -> int:
        """One round: back-pressure check, take over idle entries, read new ones, enqueue, ack. Returns the entries
        handled."""
        if self.downstream_full():
            time.sleep(self.s.read_block_ms / 1000)
            return 0
        handled = self._handle(self._claim_idle(), redelivered=True)
        start = "0" if self.recover_own else ">"
        block = None if self.recover_own else self.s.read_block_ms
        reply = self.client.xreadgroup(
            self.s.consumer_group, self.name, {self.stream: start}, count=self.s.read_batch, block=block
        )
        entries = reply[0][1] if reply else []
        if self.recover_own and len(entries) < self.s.read_batch:
            self.recover_own = False  # our history is drained; from now on only new entries
        return handled + self._handle(entries, redelivered=start == "0")

    def _claim_idle(self) -> list:
        _next, claimed, deleted = self.client.xautoclaim(
            self.stream, self.s.consumer_group, self.name, self.s.claim_idle_ms, "0-0", count=self.s.read_batch
        )[:3]
        if deleted:  # trimmed before anyone processed them: nothing left to process, say so in the log
            log.warning("%d pending entries were deleted from %s before processing", len(deleted), self.stream)
            self.client.xack(self.stream, self.s.consumer_group, *deleted)
        return claimed

    def _deliveries(self, entry_id) -> int:
        info = self.client.xpending_range(self.stream, self.s.consumer_group, min=entry_id, max=entry_id, count=1)
        return info[0]["times_delivered"] if info else 1

    def _handle(self, entries: list, redelivered: bool) -> int:
        if not entries:
            return 0
        acks, batch, batch_ids = [], [], []
        try:
            with self.app.producer_or_acquire() as producer:
                for entry_id, fields in entries:
                    if fields is None:  # an entry deleted while pending
                        acks.append(entry_id)
                        continue
                    if redelivered:
                        self.metrics.redeliveries.inc()
                        if self._deliveries(entry_id) > self.s.max_deliveries:
                            self._dead(
                                entry_id, fields, f"max_deliveries: delivered more than {self.s.max_deliveries} times"
                            )
                            acks.append(entry_id)
                            continue
                    item = self._task_item(entry_id, fields)
                    if item is None:
                        acks.append(entry_id)  # dead-lettered
                        continue
                    batch.append(item)
                    batch_ids.append(entry_id)
                    if len(batch) >= self.s.task_batch:
                        self._send(producer, batch)
                        acks += batch_ids
                        batch, batch_ids = [], []
                if batch:
                    self._send(producer, batch)
                    acks += batch_ids
        finally:
            # ack what is durably enqueued even if the broker failed half-way: the rest stays pending
            if acks:
                self.client.xack(self.stream, self.s.consumer_group, *acks)
        return len(entries)

    def requeue(self, entry_ids: list[str]) -> None:
        """Enqueue scoring tasks for entries already acknowledged whose task was lost (`workers/orphans.py`)."""
        with self.app.producer_or_acquire() as producer:
            for start in range(0, len(entry_ids), self.s.task_batch):
                self._send(producer, entry_ids[start : start + self.s.task_batch])
        self.metrics.orphans_requeued.inc(len(entry_ids))

    def _task_item(self, entry_id: bytes, fields: dict) -> str | None:
        """The entry's id for a scoring task (the worker reads the trajectory from the stream by it), or None for
        an entry without a trajectory id or payload (dead-lettered here: no worker could do anything with it)."""
        traj_id, data = fields.get(b"id"), fields.get(b"data")
        if not data or not traj_id:
            missing = "data" if not data else "id"
            self._dead(entry_id, fields, f"invalid_payload: stream entry has no '{missing}' field")
            return None
        return _text(entry_id)

    def _send(self, producer, batch: list[str]) -> None:
        """Returns once the task message is in the broker (an LPUSH that returned), else raises."""
        self.app.send_task(
            SCORE_TASK, args=[batch], queue=self.s.score_queue, producer=producer, retry=False, ignore_result=True
        )

    def _dead(self, entry_id: bytes, fields: dict, reason: str) -> None:
        # without an id, the payload's digest names the entry, so feeding the same bytes again is recognised
        ident = fields.get(b"id") or b"sha1:" + hashlib.sha1(fields.get(b"data") or entry_id).hexdigest().encode()
        ident = ident.decode(errors="replace")
        # the entry's payload is in the dead letter now: the entry leaves the stream in the same script
        if self.dead.add(ident, reason, self.stream, fields.get(b"data"), _text(entry_id)):
            self.metrics.dead_letters.labels(reason=reason_kind(reason)).inc()


def _text(entry_id: bytes | str) -> str:
    return entry_id.decode() if isinstance(entry_id, bytes) else entry_id


def lag_seconds(client: redis.Redis, stream: str, group: str) -> float:
    """Age of the oldest entry not yet delivered to the group (0 when it has caught up)."""
    info = group_info(client, stream, group)
    if info is None:
        return 0.0
    last = info["last-delivered-id"]
    after = client.xrange(stream, min=b"(" + (last if isinstance(last, bytes) else last.encode()), count=1)
    if not after:
        return 0.0
    ms = int(after[0][0].split(b"-")[0])
    return max(0.0, time.time() - ms / 1000)


def group_info(client: redis.Redis, stream: str, group: str) -> dict | None:
    """XINFO GROUPS' record of `group` on `stream`; None without the stream or the group."""
    if not client.exists(stream):
        return None
    return next((g for g in client.xinfo_groups(stream) if _text(g["name"]) == group), None)
