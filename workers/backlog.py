"""How full `slca:groups` is for its readers, and trimming what every reader has acknowledged.

A consumer group acknowledges entries but does not delete them, so the stream's length says nothing about the
readers' backlog: back-pressure uses pending + lag per consumer group (the worst group), and the assembler
trims entries that every live group has acknowledged (never one still pending or not yet delivered). A group no
process reads any more (no consumer, or every consumer idle past `stale_ms`: a leftover of an earlier run, a
renamed learner group) is passed over while a live group is there, else it would hold the trimming back for ever;
when no group is live, every group counts as before (a learner that is down keeps what it has not acknowledged).
With no consumer group on the stream, the length is the backlog and nothing is trimmed.
"""

from __future__ import annotations

import redis


def _id(value) -> tuple[int, int]:
    ms, _, seq = (value.decode() if isinstance(value, bytes) else value).partition("-")
    return int(ms), int(seq or 0)


def backlog(client: redis.Redis, stream: str) -> int:
    groups = client.xinfo_groups(stream) if client.exists(stream) else []
    if not groups:
        return client.xlen(stream)
    worst = 0
    for g in groups:
        lag = g.get("lag")
        worst = max(worst, g["pending"] + (client.xlen(stream) if lag is None else lag))
    return worst


def trim_consumed(client: redis.Redis, stream: str, stale_ms: int) -> int:
    """XTRIM MINID to the oldest entry some live consumer group still needs; returns the entries removed."""
    groups = client.xinfo_groups(stream) if client.exists(stream) else []
    live = [g for g in groups if _live(client, stream, g["name"], stale_ms)]
    floor = None
    for g in live or groups:
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
