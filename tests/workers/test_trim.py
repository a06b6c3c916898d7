"""Trimming `slca:groups` and its back-pressure (workers/backlog.py): a consumer group that no process reads any
more — a leftover of an earlier run or of a renamed learner group — no longer holds back the trimming of what the
live readers have acknowledged, nor counts in the backlog that stops intake; a reader that is only slow (or the
only one there is) still keeps every entry it has not acknowledged."""

from __future__ import annotations

import time

from workers.backlog import backlog, trim_consumed

STREAM = "slca:test:groups"
HOUR_MS = 3_600_000
N = 1000
"""Entries per test: XTRIM MINID ~ removes whole macro nodes (100 entries each by default), never a part of one."""


def _fill(client, n: int) -> list[bytes]:
    return [client.xadd(STREAM, {"n": str(i)}) for i in range(n)]


def _read_and_ack(client, group: str, consumer: str) -> None:
    reply = client.xreadgroup(group, consumer, {STREAM: ">"}, count=N)
    ids = [entry_id for _, items in reply for entry_id, _ in items]
    client.xack(STREAM, group, *ids)


def test_a_leftover_group_without_readers_does_not_stop_trimming(client):
    _fill(client, N)
    client.xgroup_create(STREAM, "learner", id="0")
    client.xgroup_create(STREAM, "old-learner", id="0")  # a group of an earlier run: nobody reads it
    _read_and_ack(client, "learner", "l1")
    assert trim_consumed(client, STREAM, stale_ms=HOUR_MS) >= N - 200


def test_a_group_whose_readers_are_all_idle_past_the_bound_does_not_stop_trimming(client):
    _fill(client, N)
    client.xgroup_create(STREAM, "learner", id="0")
    client.xgroup_create(STREAM, "gone", id="0")
    client.xreadgroup("gone", "g1", {STREAM: ">"}, count=1)  # read once, then its process went away

    def idle_ms() -> int:
        (consumer,) = client.xinfo_consumers(STREAM, "gone")
        return consumer["idle"]

    deadline = time.monotonic() + 30
    while idle_ms() < 1500 and time.monotonic() < deadline:
        time.sleep(0.1)
    _read_and_ack(client, "learner", "l1")  # the live reader
    assert trim_consumed(client, STREAM, stale_ms=1000) >= N - 200


def test_a_live_or_lone_reader_keeps_what_it_has_not_acknowledged(client):
    ids = _fill(client, N)
    client.xgroup_create(STREAM, "learner", id="0")
    client.xreadgroup("learner", "l1", {STREAM: ">"}, count=N)
    client.xack(STREAM, "learner", *ids[:500])
    # pending from ids[500] on; the only group, however idle, is never passed over
    assert trim_consumed(client, STREAM, stale_ms=0) > 0
    assert [e for e, _ in client.xrange(STREAM)][-500:] == ids[500:]


def test_a_leftover_group_does_not_count_in_the_backlog_but_a_lone_one_does(client):
    """Back-pressure (`backlog`, what stops intake at `workers.max_groups_len`) passes over a leftover group as the
    trimming does; a reader that is the only group, however idle, still counts."""
    _fill(client, N)
    client.xgroup_create(STREAM, "old-learner", id="0")
    assert backlog(client, STREAM, stale_ms=HOUR_MS) == N  # no live group: every group counts
    client.xgroup_create(STREAM, "learner", id="0")
    _read_and_ack(client, "learner", "l1")
    assert backlog(client, STREAM, stale_ms=HOUR_MS) == 0  # the leftover owes N, the live learner nothing
    client.xadd(STREAM, {"n": "new"})
    assert backlog(client, STREAM, stale_ms=HOUR_MS) == 1
