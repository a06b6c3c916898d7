"""How full `slca:groups` is for its readers, and trimming what every reader has acknowledged.

A consumer group acknowledges entries but does not delete them, so the stream's length says nothing about the
readers' backlog: back-pressure uses pending + lag per consumer group (the worst group), and the assembler
trims entries that every live group has acknowledged (never one still pending or not yet delivered). A group no
process reads any more (no consumer, or every consumer idle past `stale_ms`: a leftover of an earlier run, a
renamed learner group) is passed over while a live group is there, by both: else it would hold the trimming
back for ever, and hold the producers back once its backlog reached the bound — a learner that reads and
acknowledges every group would starve behind a reader that is gone. When no group is live, every group counts
as before (a learner that is down keeps what it has not acknowledged, and its backlog still stops intake).
With no consumer group on the stream, the length is the backlog and nothing is trimmed.
"""

from __future__ import annotations

import redis


def _id(value) -> tuple[int, int]:
    ms, _, seq = (value.decode() if isinstance(value, bytes) else value).partition("-")
    return int(ms), int(seq or 0)


def _name(group) -> str:
    name = group["name"]
    return name.decode() if isinstance(name, bytes) else name


def backlog(client: redis.Redis, stream: str, stale_ms: int) -> int:
    """What the worst counted consumer group still owes (pending + not yet delivered); the length without one."""
    groups = client.xinfo_groups(stream) if client.exists(stream) else []
    if not groups:
        return client.xlen(stream)
    owed = [(g["pending"] + (client.xlen(stream) if g.get("lag") is None else g["lag"]), g) for g in groups]
    owed.sort(key=lambda pair: pair[0], reverse=True)
    # worst first: usually the worst group is live and one consumer lookup decides
    for count, g in owed:
        if _live(client, stream, g["name"], stale_ms):
            return count
    return owed[0][0]


def live_groups(client: redis.Redis, stream: str, stale_ms: int, groups: list | None = None) -> list[str]:
    """The names of the consumer groups some consumer of which has read (or tried to) within `stale_ms`."""
    if groups is None:
        groups = client.xinfo_groups(stream) if client.exists(stream) else []
    return [_name(g) for g in groups if _live(client, stream, g["name"], stale_ms)]


def trim_consumed(client: redis.Redis, stream: str, stale_ms: int) -> int:
    """XTRIM MINID to the oldest entry some live consumer group still needs; returns the entries removed."""
    groups = client.xinfo_groups(stream) if client.exists(stream) else []
    live = set(live_groups(client, stream, stale_ms, groups))
    floor = None
    for g in [g for g in groups if _name(g) in live] or groups:
        needed = g["last-delivered-id"]  # kept itself: MINID removes strictly older entries
        if g["pending"]:
            needed = client.xpending(stream, g["name"])["min"]
        floor = needed if floor is None or _id(needed) < _id(floor) else floor
    return client.xtrim(stream, minid=floor) if floor and _id(floor) > (0, 0) else 0


def _live(client: redis.Redis, stream: str, group, stale_ms: int) -> bool:
    """Some consumer of `group` has read (or tried to) within `stale_ms`."""
    for consumer in client.xinfo_consumers(stream, group):
        inactive = consumer.get("inactive", -1)  # Redis 7.2+: since its last successful read; else idle
        if (inactive if inactive is not None and inactive >= 0 else consumer["idle"]) < stale_ms:
            return True
    return False
