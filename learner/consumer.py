"""Reading rollout groups from `slca:groups` with a Redis consumer group (docs/design.md#queues).

Entries stay pending until `ack` — the loop acknowledges only after the step that used them is checkpointed,
so a crash redelivers them; the checkpoint's `consumed` ids make the redelivery a no-op for applied groups.

Order of a read: first this consumer's own pending entries (id 0, once after start: a restarted learner
resumes its own work, which is why its name is stable, see `consumer_name`), then entries pending on *any*
consumer for longer than `claim_idle_ms` (XAUTOCLAIM: a learner that died, or ran under another name, left
them), then new ones (>). A live learner holding entries across steps calls `keep_alive` so that its own
entries never look idle to another consumer (XCLAIM JUSTID resets the idle time without counting a delivery);
XAUTOCLAIM does not tell whose entries it took, so entries this consumer already holds are not handed out twice.

Race left open: a consumer that dies between its checkpoint and its XACK leaves applied entries pending. If
its successor under the same name restarts first, the checkpoint's ids make them a no-op; if another consumer
with its own checkpoint claims them after `claim_idle_ms`, they are applied once more. Keep `claim_idle_ms`
well above a restart.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis

from slca.contracts import ContractError, RolloutGroup, Streams, decode_entry
from slca.contracts.queues import DEAD_MAXLEN

log = logging.getLogger("slca.learner")


@dataclass
class GroupEntry:
    entry_id: bytes
    group: RolloutGroup | None
    error: str | None = None
    raw: dict | None = None


def consumer_name(configured: str | None) -> str:
    """This learner's name in the consumer group: `configured`, else `learner-0`. Never the host name: a learner
    restarted elsewhere must find its own pending entries under the same name. Not the rank either: under torchrun
    only rank 0 reads (`learner.ddp_orders`), so one process or N use the same name and the same pending entries
    (`learner-0` was rank 0's name when every rank read its own groups)."""
    return configured or "learner-0"


class GroupConsumer:
    def __init__(self, client: redis.Redis, streams: Streams, group: str, consumer: str, claim_idle_ms: int = 600_000):
        self.client = client
        self.streams = streams
        self.group = group
        self.consumer = consumer
        self.claim_idle_ms = claim_idle_ms
        self._pending_cursor: bytes | str | None = "0"
        """Where the re-read of this consumer's own pending entries continues; None once done."""
        self._claim_cursor = "0-0"
        self._held: set[bytes] = set()
        """Entries read and not yet acknowledged."""
        self.ready = self._ensure_group()
        """The consumer group exists (False: a full Redis refused to create it; `read` tries again)."""

    def _ensure_group(self) -> bool:
        """Create the consumer group unless it exists; False when Redis is full (XGROUP CREATE needs memory, even
        for a group that exists: then it is looked up instead)."""
        try:
            self.client.xgroup_create(self.streams.groups, self.group, id="0", mkstream=True)
        except redis.exceptions.OutOfMemoryError as exc:
            if self._group_exists():
                return True
            log.warning("learner: cannot create consumer group %s yet (%s); trying again", self.group, exc)
            return False
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        return True

    def _group_exists(self) -> bool:
        try:
            groups = self.client.xinfo_groups(self.streams.groups)
        except redis.ResponseError:  # no such stream
            return False
        return any(g["name"] in (self.group, self.group.encode()) for g in groups)

    def read(self, count: int, block_ms: int) -> list[GroupEntry]:
        if not self.ready:
            self.ready = self._ensure_group()
            if not self.ready:
                time.sleep(block_ms / 1000)  # as long as a read would have waited
                return []
        entries = []
        if self._pending_cursor is not None:
            entries = self._read(self._pending_cursor, count, None)
            self._pending_cursor = entries[-1].entry_id if entries else None
        entries = entries or self._claim(count) or self._read(">", count, block_ms)
        self._held.update(e.entry_id for e in entries)
        return entries

    def _read(self, start: str, count: int, block_ms: int | None) -> list[GroupEntry]:
        reply = self.client.xreadgroup(
            self.group, self.consumer, {self.streams.groups: start}, count=count, block=block_ms
        )
        out = []
        for _stream, items in reply or []:
            for entry_id, fields in items:
                out.append(self._decode(entry_id, fields))
        return out

    def _claim(self, count: int) -> list[GroupEntry]:
        """Entries idle past the deadline on any consumer, taken over (their delivery count goes up)."""
        reply = self.client.xautoclaim(
            self.streams.groups, self.group, self.consumer, self.claim_idle_ms, start_id=self._claim_cursor, count=count
        )
        self._claim_cursor = reply[0]  # the scan's cursor; back at 0-0 once the whole pending list was seen
        # an entry trimmed from the stream comes back without fields (Redis 7 drops it from the pending list)
        return [
            self._decode(entry_id, fields) for entry_id, fields in reply[1] if fields and entry_id not in self._held
        ]

    @staticmethod
    def _decode(entry_id, fields) -> GroupEntry:
        try:
            return GroupEntry(entry_id, decode_entry(RolloutGroup, fields))
        except ContractError as exc:
            return GroupEntry(entry_id, None, str(exc), fields)

    def keep_alive(self) -> None:
        """Reset the idle time of the entries this consumer holds (read, not yet acknowledged)."""
        if self._held:
            self.client.xclaim(self.streams.groups, self.group, self.consumer, 0, sorted(self._held), justid=True)

    def ack(self, entry_ids: list[bytes]) -> None:
        if entry_ids:
            self.client.xack(self.streams.groups, self.group, *entry_ids)
            self._held.difference_update(entry_ids)

    def dead_letter(self, entry: GroupEntry) -> None:
        """An undecodable entry goes to `slca:dead` with the reason; then it is acknowledged."""
        fields = {
            b"id": entry.entry_id,
            b"reason": (entry.error or "invalid").encode(),
            b"source": self.streams.groups.encode(),
        }
        payload = (entry.raw or {}).get(b"data")
        if payload is not None:
            fields[b"data"] = payload
        # bounded like the workers' dead letters (the same DEAD_MAXLEN): a poison producer cannot grow it
        try:
            self.client.xadd(self.streams.dead, fields, maxlen=DEAD_MAXLEN, approximate=True)
        except redis.ResponseError as exc:  # a full Redis (OOM): left pending, claimed again after claim_idle_ms
            log.warning(
                "group entry %s not dead-lettered (%s); it stays pending, to be tried again", entry.entry_id, exc
            )
            self._held.discard(entry.entry_id)  # no longer kept alive: XAUTOCLAIM hands it out again once idle
            return
        self.ack([entry.entry_id])
