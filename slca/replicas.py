"""Serve replicas' statuses in Redis: the one writer (`announce`, `withdraw`: called by serve) and the one reader
(`read_replicas`, `read_replicas_async`: `slca status` and the dashboard). The record is
`slca.contracts.replicas.ReplicaStatus`; docs/design.md#replicas.

Layout: one key per replica, `<prefix>:replica:<id>`, holding its JSON status and expiring `ttl_s` after each
write, so a dead replica disappears by itself; and an index, the sorted set `<prefix>:replicas` (id → time of its
last write), so that readers find the keys without SCAN over the whole keyspace. The index never expires (an
`allkeys` eviction would be the only way to lose it, and `slca up`'s Redis evicts only keys with a TTL); each write
also drops index entries older than `INDEX_KEEP_TTLS` lifetimes, whose keys are long gone.
"""

from __future__ import annotations

import logging
import time

from slca.contracts import ContractError, Streams, load_json
from slca.contracts.replicas import ReplicaStatus, ReplicaView

log = logging.getLogger(__name__)

READ_MAX = 1000
"""Most replicas a reader lists (the most recently written first)."""
INDEX_KEEP_TTLS = 10
"""An index entry not rewritten for this many key lifetimes is dropped by the next write of any replica."""


async def announce(client, streams: Streams, status: ReplicaStatus) -> None:
    """Write `status` (a `redis.asyncio` client): its key with a fresh lifetime and its index entry, atomically."""
    now = time.time()
    pipe = client.pipeline(transaction=True)
    pipe.set(streams.replica(status.replica), status.model_dump_json(), px=max(1, int(status.ttl_s * 1000)))
    pipe.zadd(streams.replicas, {status.replica: now})
    pipe.zremrangebyscore(streams.replicas, "-inf", now - INDEX_KEEP_TTLS * status.ttl_s)
    await pipe.execute()


async def withdraw(client, streams: Streams, replica_id: str) -> None:
    """Remove a replica that stops cleanly (a stopped replica is gone, not stale)."""
    pipe = client.pipeline(transaction=True)
    pipe.delete(streams.replica(replica_id))
    pipe.zrem(streams.replicas, replica_id)
    await pipe.execute()


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _status_reads(pipe, streams: Streams, ids: list[str]):
    for replica_id in ids:
        pipe.get(streams.replica(replica_id))
        pipe.pttl(streams.replica(replica_id))
    return pipe


def parse_replicas(ids: list[str], results: list, now: float | None = None) -> list[ReplicaView]:
    """(GET, PTTL) per id → the views of the replicas whose key is still there, sorted by id. An entry that does not
    decode is skipped with a warning: one bad record never blanks the listing."""
    now = time.time() if now is None else now
    views, bad = [], []
    for replica_id, raw, pttl in zip(ids, results[0::2], results[1::2]):
        if raw is None:
            continue  # expired: the replica stopped heartbeating long ago (its index entry goes later)
        try:
            status = load_json(ReplicaStatus, raw)
        except ContractError as exc:
            bad.append(f"{replica_id}: {exc}")
            continue
        pttl = int(pttl)
        # the key's remaining lifetime says when it was written, on Redis' clock; a key without one (written by
        # hand) falls back to the writer's clock
        age = status.ttl_s - pttl / 1000 if pttl >= 0 else now - status.updated_at
        views.append(ReplicaView(status, max(0.0, age)))
    if bad:
        log.warning("replica statuses: %d malformed, skipped, e.g. %s", len(bad), bad[0])
    return sorted(views, key=lambda v: v.status.replica)


def read_replicas(client, prefix: str = "slca", limit: int = READ_MAX) -> list[ReplicaView]:
    """Every replica with a live key (a `redis.Redis` client), sorted by id."""
    streams = Streams(prefix)
    ids = [_text(i) for i in client.zrevrange(streams.replicas, 0, limit - 1)]
    if not ids:
        return []
    return parse_replicas(ids, _status_reads(client.pipeline(transaction=False), streams, ids).execute())


async def read_replicas_async(client, prefix: str = "slca", limit: int = READ_MAX) -> list[ReplicaView]:
    """The same read with a `redis.asyncio.Redis` client (the dashboard runs in serve's event loop)."""
    streams = Streams(prefix)
    ids = [_text(i) for i in await client.zrevrange(streams.replicas, 0, limit - 1)]
    if not ids:
        return []
    return parse_replicas(ids, await _status_reads(client.pipeline(transaction=False), streams, ids).execute())
