"""What the system looks like from Redis: queue depths, the published weight version, recent rewards and
learner steps, and the feed's held-out probe rounds. Shared by `slca status`, the live table of `slca up`, the
dashboard and `slca bench online`."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from slca.contracts import ContractError, Streams
from slca.contracts.queues import STATS_PROBE
from slca.contracts.stats import (
    PROBE_READ_DEFAULT,
    PROBE_READ_MAX,
    STATS_READ_DEFAULT,
    LearnerStepStats,
    RewardStats,
    StatsRecord,
    probe_from_fields,
)

log = logging.getLogger("slca.observe")


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
    """Oldest first: `RewardStats.to_row()` (exec, pref, tool_turns, success, policy_version, ts) and the entry's
    `id`."""
    learner: list[dict[str, Any]] = field(default_factory=list)
    """Oldest first: `LearnerStepStats.to_row()` (step, version, loss, kl, clip_frac, groups, ts, and `zero_var`:
    {channel: share}, empty for rows written before the learner recorded it) and the entry's `id`."""
    probe: list[dict[str, Any]] = field(default_factory=list)
    """Oldest first: the held-out probe's stream entries as `read_rounds` returns them (JSON of
    `ops.observe.probe_rounds.ProbeRound`; `ProbeRound.from_json` / `ops.observe.probe_report.rounds_of` type them and
    skip entries of an older schema); read only by `read_snapshot_async` (the CLI reads them with `read_rounds`)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _entry_key(entry_id: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in _text(entry_id).split("-"))


def parse_records(entries: list, record: type[StatsRecord]) -> list[dict[str, Any]]:
    """XRANGE/XREVRANGE entries of a stats stream → rows (`record.from_fields(...).to_row()` plus the entry's `id`),
    oldest first. A malformed entry (`ContractError`) is skipped with a warning: one bad row never blanks a view."""
    rows, bad = [], []
    for entry_id, fields in entries:
        try:
            row = record.from_fields(fields).to_row()
        except ContractError as exc:
            bad.append(f"{_text(entry_id)}: {exc}")
            continue
        row["id"] = _text(entry_id)
        rows.append(row)
    if bad:
        log.warning("%s: %d malformed stream entries skipped, e.g. %s", record.STREAM, len(bad), bad[0])
    rows.sort(key=lambda r: _entry_key(r["id"]))
    return rows


def parse_rounds(entries: list) -> list[dict[str, Any]]:
    """XREVRANGE entries of the probe stream → its rounds, oldest first, exactly as `read_rounds` returns them
    (that one reads with a sync client; this parses what the async pipeline fetched). Malformed entries are
    skipped with a warning."""
    rounds, bad = [], []
    for entry_id, fields in sorted(entries, key=lambda e: _entry_key(e[0])):
        try:
            rounds.append(probe_from_fields(fields))
        except ContractError as exc:
            bad.append(f"{_text(entry_id)}: {exc}")
    if bad:
        log.warning("%s: %d malformed stream entries skipped, e.g. %s", STATS_PROBE, len(bad), bad[0])
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


def _queue_snapshot_reads(pipe, streams: Streams, names: list[str], n_rewards: int, n_learner: int, n_probe: int):
    """One pipeline for a snapshot: the queues' lengths, the latest version, the stats streams (newest first)."""
    for name in names:
        pipe.xlen(name)
    pipe.get(streams.weights_latest)
    pipe.xrevrange(streams.stats(RewardStats.STREAM), count=n_rewards)
    pipe.xrevrange(streams.stats(LearnerStepStats.STREAM), count=n_learner)
    if n_probe:
        pipe.xrevrange(streams.stats(STATS_PROBE), count=n_probe)
    return pipe


def _snapshot(names: list[str], results: list, groups: list[list[dict]], n_probe: int) -> Snapshot:
    queues = [
        QueueDepth(name, int(length), backlog_of(int(length), g))
        for name, length, g in zip(names, results[: len(names)], groups)
    ]
    rest = results[len(names) :]
    probe = parse_rounds(rest[3]) if n_probe else []
    return Snapshot(
        queues,
        parse_version(rest[0]),
        parse_records(rest[1], RewardStats),
        parse_records(rest[2], LearnerStepStats),
        probe,
    )


def read_snapshot(
    client, prefix: str = "slca", n_rewards: int = STATS_READ_DEFAULT, n_learner: int = STATS_READ_DEFAULT
) -> Snapshot:
    """Synchronous read (for the CLI) with a `redis.Redis` client."""
    import redis

    streams = Streams(prefix)
    names = streams_to_watch(streams)
    results = _queue_snapshot_reads(
        client.pipeline(transaction=False), streams, names, n_rewards, n_learner, 0
    ).execute()
    groups = []
    for name, length in zip(names, results):
        try:
            groups.append(client.xinfo_groups(name) if length else [])
        except redis.ResponseError:
            groups.append([])
    return _snapshot(names, results, groups, 0)


async def read_snapshot_async(
    client,
    prefix: str = "slca",
    n_rewards: int = STATS_READ_DEFAULT,
    n_learner: int = STATS_READ_DEFAULT,
    n_probe: int = PROBE_READ_DEFAULT,
) -> Snapshot:
    """The same read with a `redis.asyncio.Redis` client (the dashboard runs inside the API's event loop), plus
    the latest `n_probe` held-out probe rounds."""
    import redis

    streams = Streams(prefix)
    names = streams_to_watch(streams)
    pipe = _queue_snapshot_reads(client.pipeline(transaction=False), streams, names, n_rewards, n_learner, n_probe)
    results = await pipe.execute()
    groups = []
    for name, length in zip(names, results):
        try:
            groups.append(await client.xinfo_groups(name) if length else [])
        except redis.ResponseError:
            groups.append([])
    return _snapshot(names, results, groups, n_probe)


def read_rounds(redis_client, stream: str, count: int = PROBE_READ_MAX) -> list[dict]:
    """The latest `count` probe rounds, oldest first (sync client: `slca status`, `slca bench online`)."""
    return parse_rounds(redis_client.xrevrange(stream, count=count))


def read_probe_rounds(redis_url: str, prefix: str) -> list[dict]:
    """The feed's held-out probe rounds (`ops.run.feed.probe`), oldest first; [] when Redis can't be read."""
    import redis

    client = redis.Redis.from_url(redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
    try:
        return read_rounds(client, Streams(prefix).stats(STATS_PROBE))
    except redis.RedisError:
        return []
    finally:
        client.close()
