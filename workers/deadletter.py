"""The dead-letter stream: entries that cannot be processed, each with a reason and the original payload.

Idempotent per entry id: a redelivered or re-fed entry is dead-lettered once. Bounded: `MAXLEN ~ maxlen`
drops the oldest dead letters. When the caller names the entry's own id in its source stream, that entry is
deleted in the same script: its payload now lives in the dead letter, and the source stream stays bounded.
"""

from __future__ import annotations

import redis

from slca.contracts.queues import DEAD_MAXLEN
from workers.keys import Keys
from workers.luascripts import LuaScript, ScriptBatch

_DEAD_LETTER = """
local added = 0
if redis.call('SET', KEYS[1], ARGV[2], 'NX', 'EX', tonumber(ARGV[5])) then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'id', ARGV[1], 'reason', ARGV[2], 'source', ARGV[3],
             'data', ARGV[4])
  added = 1
end
if ARGV[7] ~= '' then redis.call('XDEL', KEYS[3], ARGV[7]) end
return added
"""

REASON_KINDS = ("invalid_payload", "scoring_error", "max_deliveries", "late", "group_timeout", "task_failed")
"""Bounded set of reason prefixes (the metric label); the full reason text is in the entry."""


def reason_kind(reason: str) -> str:
    head = reason.split(":", 1)[0]
    return head if head in REASON_KINDS else "other"


class DeadLetters:
    def __init__(self, client: redis.Redis, keys: Keys, ttl_s: int, maxlen: int = DEAD_MAXLEN):
        self.keys = keys
        self.ttl_s = ttl_s
        self.maxlen = maxlen
        self.client = client
        self._script = LuaScript(_DEAD_LETTER)

    def add(
        self, entry_id: str, reason: str, source: str, data: bytes | None, stream_entry: str | bytes | None = None
    ) -> bool:
        """Record the entry; False when it was already dead-lettered. `stream_entry`: the entry's id in the
        `source` stream, deleted there (also when it was already dead-lettered: a redelivery's leftover)."""
        batch = ScriptBatch(self.client)
        batch.add(
            self._script,
            [self.keys.dead_mark(entry_id), self.keys.streams.dead, source],
            [entry_id, reason, source, data or b"", self.ttl_s, self.maxlen, stream_entry or ""],
        )
        return bool(batch.execute()[0])
