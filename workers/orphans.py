"""Stream entries whose scoring task the broker lost: found by the assembler and enqueued again.

Kombu's Redis transport takes a task with BRPOP and records it as unacknowledged only afterwards, in a second
command. A worker whose connection drops between the two (Redis killed or restarted, a network partition, a
reply lost with the connection) takes the task with it: it is in no queue and in no unacknowledged hash, so no
visibility timeout brings it back, and its stream entries were acknowledged once the task was enqueued. Seen in
CI: Redis SIGKILLed mid-run, four whole groups never written.

The trajectories stream says what is still on its way (an entry leaves it only once grouped or dead-lettered),
so it is compared with what the broker holds. An entry is an orphan when it was delivered to the consumer group
and acknowledged, its trajectory is in no bucket, and no scoring task queued or unacknowledged names it — on two
checks `orphan_check_s` apart: a task caught between the two commands at one check is unacknowledged (or done)
at the next. Enqueueing an entry twice is harmless (scoring is idempotent), losing one is not.
"""

from __future__ import annotations


import redis

from workers.celery_app import KOMBU_UNACKED_KEY, task_entry_ids
from workers.consumer import group_info
from workers.keys import Keys
from workers.settings import WorkerSettings


SCAN_LIMIT = 5000
"""Stream entries one check reads (oldest first: orphans are old)."""
MAX_QUEUED_TASKS = 2000
"""A check reads every queued task's message; with more queued than this it waits for the backlog to shrink."""


class OrphanFinder:
    def __init__(self, client: redis.Redis, keys: Keys, settings: WorkerSettings):
        self.client = client
        self.keys = keys
        self.s = settings
        self.suspects: set[str] = set()
        """Entries that looked orphaned at the previous check."""

    @property
    def stream(self) -> str:
        return self.keys.streams.trajectories

    def check(self) -> list[str]:
        """One check; returns the entry ids orphaned at this check and the previous one (to enqueue again)."""
        if self.client.llen(self.s.score_queue) > MAX_QUEUED_TASKS:
            self.suspects = set()
            return []
        candidates = self._unscored_delivered()
        if candidates:
            candidates -= self._named_by_tasks()
        orphans = sorted(candidates & self.suspects, key=_id_key)
        self.suspects = candidates - set(orphans)
        return orphans

    def _unscored_delivered(self) -> set[str]:
        """Entries delivered and acknowledged whose trajectory is in no bucket."""
        last = _last_delivered(self.client, self.stream, self.s.consumer_group)
        if last is None:
            return set()
        entries = [
            (_text(eid), fields.get(b"id"))
            for eid, fields in self.client.xrange(self.stream, min="-", max=last, count=SCAN_LIMIT)
            if fields.get(b"id")
        ]
        if not entries:
            return set()
        pipe = self.client.pipeline(transaction=False)
        for eid, traj_id in entries:
            pipe.exists(self.keys.member(traj_id.decode(errors="replace")))
            pipe.xpending_range(self.stream, self.s.consumer_group, min=eid, max=eid, count=1)
        replies = pipe.execute()
        return {eid for i, (eid, _) in enumerate(entries) if not replies[2 * i] and not replies[2 * i + 1]}

    def _named_by_tasks(self) -> set[str]:
        """Entry ids carried by the scoring tasks in the queue or held unacknowledged by a worker."""
        pipe = self.client.pipeline(transaction=False)
        pipe.lrange(self.s.score_queue, 0, -1)
        pipe.hvals(KOMBU_UNACKED_KEY)
        queued, unacked = pipe.execute()
        named: set[str] = set()
        for raw in [*queued, *unacked]:
            named.update(task_entry_ids(raw))
        return named


def _last_delivered(client: redis.Redis, stream: str, group: str) -> str | None:
    info = group_info(client, stream, group)
    last = None if info is None else _text(info["last-delivered-id"])
    return None if last in (None, "0-0") else last


def _id_key(entry_id: bytes | str) -> tuple[int, int]:
    ms, _, seq = _text(entry_id).partition("-")
    return int(ms), int(seq or 0)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
