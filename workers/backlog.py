"""How full `slca:groups` is for its readers, and trimming what every reader has acknowledged.

A consumer group acknowledges entries but does not delete them, so the stream's length says nothing about the
readers' backlog: back-pressure uses pending + lag per consumer group (the worst group), and the assembler
trims entries that every group has acknowledged (never one still pending or not yet delivered). With no
consumer group on the stream, the length is the backlog and nothing is trimmed.
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


def trim_consumed(client: redis.Redis, stream: str) -> int:
    """XTRIM MINID to the oldest entry some consumer group still needs; returns the entries removed."""
    groups = client.xinfo_groups(stream) if client.exists(stream) else []
    if not groups:
        return 0
    floor = None
    for g in groups:
        needed = g["last-delivered-id"]  # kept itself: MINID removes strictly older entries
        if g["pending"]:
            needed = client.xpending(stream, g["name"])["min"]
        floor = needed if floor is None or _id(needed) < _id(floor) else floor
    return client.xtrim(stream, minid=floor) if floor and _id(floor) > (0, 0) else 0
