"""What the system looks like from Redis: queue depths, the published weight version, recent rewards and
learner steps, and the feed's held-out probe rounds. Shared by `slca status`, the live table of `slca up`, the
dashboard and `slca bench online`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ops.observe.probe_rounds import PROBE_SUFFIX
from slca.contracts import Streams
from slca.contracts.queues import STATS_LEARNER, STATS_REWARDS

REWARD_FIELDS = ("exec", "pref", "tool_turns", "policy_version", "ts")
LEARNER_FIELDS = ("step", "version", "loss", "kl", "clip_frac", "groups", "ts")
ZERO_VAR_PREFIX = "zero_var/"
"""Learner rows carry one `zero_var/<channel>` field per channel of the estimator (its share of the step's groups
with zero reward variance there); the channels differ by estimator, so they are collected by prefix."""


@dataclass
class QueueDepth:
    stream: str
    length: int
    """XLEN: entries kept in the stream (consumed ones too, until trimmed)."""
    backlog: int
    """Entries not yet processed: the largest (lag + pending) over the stream's consumer groups, or the
    length when no group reads it yet."""


@dataclass
class Snapshot:
    queues: list[QueueDepth] = field(default_factory=list)
    published_version: int | None = None
    rewards: list[dict[str, Any]] = field(default_factory=list)
    """Oldest first: exec, pref, tool_turns, policy_version, ts."""
    learner: list[dict[str, Any]] = field(default_factory=list)
    """Oldest first: step, version, loss, kl, clip_frac, groups, ts, and `zero_var`: {channel: share} (empty for rows
    written before the learner recorded it)."""
    probe: list[dict[str, Any]] = field(default_factory=list)
    """Oldest first: the held-out probe's stream entries as `read_rounds` returns them (JSON of
    `ops.observe.probe_rounds.ProbeRound`; `ProbeRound.from_json` / `ops.observe.probe_report.rounds_of` type them and
    skip entries of an older schema); read only by `read_snapshot_async` (the CLI reads them with `read_rounds`)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _number(v: Any) -> float | None:
    try:
        return float(_text(v))
    except (TypeError, ValueError):
        return None


def parse_stats(entries: list, names: tuple[str, ...], collect: str | None = None) -> list[dict[str, Any]]:
    """XRANGE/XREVRANGE entries → dicts of the numeric fields (unparseable values become None), oldest first.
    With `collect` (a field-name prefix), the fields under it go to a dict `row[prefix without '/']`."""
    rows = []
    for entry_id, fields in entries:
        decoded = {_text(k): v for k, v in fields.items()}
        row = {name: _number(decoded.get(name)) for name in names}
        if collect:
            collected = {k[len(collect) :]: _number(v) for k, v in decoded.items() if k.startswith(collect)}
            row[collect.rstrip("/")] = collected
        row["id"] = _text(entry_id)
        rows.append(row)
    rows.sort(key=lambda r: tuple(int(x) for x in r["id"].split("-")))
    return rows


def parse_rounds(entries: list) -> list[dict[str, Any]]:
    """XREVRANGE entries of the probe stream → its rounds, oldest first, exactly as `read_rounds` returns them
    (that one reads with a sync client; this parses what the async pipeline fetched). Unparseable entries are
    skipped."""
    rounds = []
    for _id, fields in reversed(entries):
        raw = fields.get(b"json") or fields.get("json")
        try:
            rounds.append(json.loads(raw))
        except (TypeError, ValueError):
            continue
    return rounds


def parse_version(raw: Any) -> int | None:
    if raw is None:
        return None
    try:
        return int(json.loads(raw)["version"])
    except (ValueError, KeyError, TypeError):
        return None


def backlog_of(length: int, groups: list[dict]) -> int:
    best = None
    for g in groups:
        g = {_text(k): v for k, v in g.items()}
        lag = g.get("lag")
        lag = length if lag is None else int(lag)  # lag is None when Redis cannot tell (after XDEL)
        total = lag + int(g.get("pending", 0))
        best = total if best is None else max(best, total)
    return length if best is None else best


def streams_to_watch(streams: Streams) -> list[str]:
    return [streams.trajectories, streams.groups, streams.dead]


def read_snapshot(client, prefix: str = "slca", n_rewards: int = 200, n_learner: int = 200) -> Snapshot:
    """Synchronous read (for the CLI) with a `redis.Redis` client."""
    import redis

    streams = Streams(prefix)
    names = streams_to_watch(streams)
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.xlen(name)
    pipe.get(streams.weights_latest)
    pipe.xrevrange(streams.stats(STATS_REWARDS), count=n_rewards)
    pipe.xrevrange(streams.stats(STATS_LEARNER), count=n_learner)
    results = pipe.execute()
    queues = []
    for name, length in zip(names, results[: len(names)]):
        try:
            groups = client.xinfo_groups(name) if length else []
        except redis.ResponseError:
            groups = []
        queues.append(QueueDepth(name, int(length), backlog_of(int(length), groups)))
    rest = results[len(names) :]
    return Snapshot(
        queues,
        parse_version(rest[0]),
        parse_stats(rest[1], REWARD_FIELDS),
        parse_stats(rest[2], LEARNER_FIELDS, ZERO_VAR_PREFIX),
    )


async def read_snapshot_async(
    client, prefix: str = "slca", n_rewards: int = 500, n_learner: int = 500, n_probe: int = 500
) -> Snapshot:
    """The same read with a `redis.asyncio.Redis` client (the dashboard runs inside the API's event loop), plus
    the latest `n_probe` held-out probe rounds."""
    import redis

    streams = Streams(prefix)
    names = streams_to_watch(streams)
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.xlen(name)
    pipe.get(streams.weights_latest)
    pipe.xrevrange(streams.stats(STATS_REWARDS), count=n_rewards)
    pipe.xrevrange(streams.stats(STATS_LEARNER), count=n_learner)
    pipe.xrevrange(streams.stats(PROBE_SUFFIX), count=n_probe)
    results = await pipe.execute()
    queues = []
    for name, length in zip(names, results[: len(names)]):
        try:
            groups = await client.xinfo_groups(name) if length else []
        except redis.ResponseError:
            groups = []
        queues.append(QueueDepth(name, int(length), backlog_of(int(length), groups)))
    rest = results[len(names) :]
    return Snapshot(
        queues,
        parse_version(rest[0]),
        parse_stats(rest[1], REWARD_FIELDS),
        parse_stats(rest[2], LEARNER_FIELDS, ZERO_VAR_PREFIX),
        parse_rounds(rest[3]),
    )


def read_rounds(redis_client, stream: str, count: int = 1000) -> list[dict]:
    """The latest `count` probe rounds, oldest first (sync client: `slca status`, `slca bench online`)."""
    return parse_rounds(redis_client.xrevrange(stream, count=count))


def read_probe_rounds(redis_url: str, prefix: str) -> list[dict]:
    """The feed's held-out probe rounds (`ops.run.feed.probe`), oldest first; [] when Redis can't be read."""
    import redis

    client = redis.Redis.from_url(redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
    try:
        return read_rounds(client, Streams(prefix).stats(PROBE_SUFFIX))
    except redis.RedisError:
        return []
    finally:
        client.close()
