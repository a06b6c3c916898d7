"""Reading rollout groups from `slca:groups` with a Redis consumer group.

Entries stay pending until `ack` — the loop acknowledges only after the step that used them is checkpointed,
so a crash redelivers them; the checkpoint's `consumed` ids make the redelivery a no-op for applied groups.
On start the consumer first re-reads its own pending entries (id 0), then new ones (>)."""

from __future__ import annotations

from dataclasses import dataclass

import redis

from slca.contracts import ContractError, RolloutGroup, Streams, decode_entry


@dataclass
class GroupEntry:
    entry_id: bytes
    group: RolloutGroup | None
    error: str | None = None
    raw: dict | None = None


class GroupConsumer:
    def __init__(self, client: redis.Redis, streams: Streams, group: str, consumer: str):
        self.client = client
        self.streams = streams
        self.group = group
        self.consumer = consumer
        self._pending_done = False
        try:
            client.xgroup_create(streams.groups, group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def read(self, count: int, block_ms: int) -> list[GroupEntry]:
        if not self._pending_done:
            entries = self._read("0", count, None)
            if entries:
                return entries
            self._pending_done = True
        return self._read(">", count, block_ms)

    def _read(self, start: str, count: int, block_ms: int | None) -> list[GroupEntry]:
        reply = self.client.xreadgroup(self.group, self.consumer, {self.streams.groups: start}, count=count, block=block_ms)
        out = []
        for _stream, items in reply or []:
            for entry_id, fields in items:
                out.append(self._decode(entry_id, fields))
        return out

    @staticmethod
    def _decode(entry_id, fields) -> GroupEntry:
        try:
            return GroupEntry(entry_id, decode_entry(RolloutGroup, fields))
        except ContractError as exc:
            return GroupEntry(entry_id, None, str(exc), fields)

    def ack(self, entry_ids: list[bytes]) -> None:
        if entry_ids:
            self.client.xack(self.streams.groups, self.group, *entry_ids)

    def dead_letter(self, entry: GroupEntry) -> None:
        """An undecodable entry goes to `slca:dead` with the reason; then it is acknowledged."""
        fields = {b"id": entry.entry_id, b"reason": (entry.error or "invalid").encode(), b"source": self.streams.groups.encode()}
        payload = (entry.raw or {}).get(b"data")
        if payload is not None:
            fields[b"data"] = payload
        self.client.xadd(self.streams.dead, fields)
        self.ack([entry.entry_id])
