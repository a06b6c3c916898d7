"""Serve replicas' statuses in Redis (slca/replicas.py, slca/contracts/replicas.py): every replica written is listed
with its served version; a replica that missed three heartbeats reads as stale, one whose key expired is gone;
a malformed record never blanks the listing; bad ids are refused with a message saying what is allowed. And the
`Trajectory.replica` field: written and read back, and records written before it existed still decode."""

from __future__ import annotations

import asyncio
import json

import msgpack
import pytest
import redis.asyncio as aioredis

from slca.contracts import ContractError, Streams, Trajectory, dump_msgpack, load_msgpack
from slca.contracts.replicas import ReplicaStatus, check_replica_id
from slca.replicas import announce, read_replicas, read_replicas_async, withdraw

PREFIX = "rt"


def status(replica: str, version: int, **extra) -> ReplicaStatus:
    fields = dict(
        replica=replica,
        url=f"http://{replica.split(':')[0]}:8000",
        policy_version=version,
        started_at=1000.0,
        heartbeat_s=1.0,
        ttl_s=60.0,
    )
    return ReplicaStatus(**{**fields, **extra})


def write(redis_url: str, *statuses: ReplicaStatus, prefix: str = PREFIX) -> None:
    """Each status as its replica writes it (`announce`)."""

    async def main():
        client = aioredis.Redis.from_url(redis_url)
        try:
            for s in statuses:
                await announce(client, Streams(prefix), s)
        finally:
            await client.aclose()

    asyncio.run(main())


def test_two_replicas_are_listed_with_their_versions_by_both_readers(redis_url, redis_client):
    write(
        redis_url,
        status("host-b:8000", 7),
        status("host-a:8000", 8, last_swap="ok", last_swap_version=8, last_swap_at=1010.0),
    )
    views = read_replicas(redis_client, PREFIX)
    assert [(v.status.replica, v.status.policy_version) for v in views] == [("host-a:8000", 8), ("host-b:8000", 7)]
    assert all(0 <= v.age_s < 5 and not v.stale for v in views)
    assert views[0].status.last_swap == "ok" and views[1].status.last_swap == "none"

    async def read_async():
        client = aioredis.Redis.from_url(redis_url)
        try:
            return await read_replicas_async(client, PREFIX)
        finally:
            await client.aclose()

    assert [v.status for v in asyncio.run(read_async())] == [v.status for v in views]
    row = views[0].to_json()
    assert row["replica"] == "host-a:8000" and row["stale"] is False and row["url"] == "http://host-a:8000"
    assert read_replicas(redis_client, "another-prefix") == []


def test_a_replica_that_stops_heartbeating_is_stale_then_gone(redis_url, redis_client):
    write(redis_url, status("live:8000", 3), status("quiet:8000", 2), status("dead:8000", 1))
    streams = Streams(PREFIX)
    # the age comes from the key's remaining lifetime (Redis' clock): 60 s - 50 s left = written 10 s ago,
    # more than 3 heartbeats of 1 s
    redis_client.pexpire(streams.replica("quiet:8000"), 50_000)
    redis_client.delete(streams.replica("dead:8000"))  # its lifetime ran out
    views = {v.status.replica: v for v in read_replicas(redis_client, PREFIX)}
    assert set(views) == {"live:8000", "quiet:8000"}
    assert not views["live:8000"].stale
    assert views["quiet:8000"].stale and 9 < views["quiet:8000"].age_s < 11
    assert views["quiet:8000"].status.policy_version == 2  # its last word stays readable while it is stale


def test_a_write_prunes_index_entries_long_expired_and_a_clean_stop_withdraws(redis_url, redis_client):
    streams = Streams(PREFIX)
    redis_client.zadd(streams.replicas, {"ghost:1": 1.0})  # written once, ages ago; its key long expired
    write(redis_url, status("a:1", 0), status("b:1", 0))
    assert {m.decode() for m in redis_client.zrange(streams.replicas, 0, -1)} == {"a:1", "b:1"}
    ttl = redis_client.pttl(streams.replica("a:1"))
    assert 55_000 < ttl <= 60_000  # every write gives the key a fresh lifetime

    async def stop():
        client = aioredis.Redis.from_url(redis_url)
        try:
            await withdraw(client, streams, "a:1")
        finally:
            await client.aclose()

    asyncio.run(stop())
    assert [v.status.replica for v in read_replicas(redis_client, PREFIX)] == ["b:1"]
    assert redis_client.zscore(streams.replicas, "a:1") is None


def test_a_malformed_status_is_skipped_not_fatal(redis_url, redis_client, caplog):
    write(redis_url, status("good:1", 4))
    streams = Streams(PREFIX)
    redis_client.set(streams.replica("bad:1"), json.dumps({"replica": "bad:1"}), ex=60)
    redis_client.zadd(streams.replicas, {"bad:1": 1e12})
    assert [v.status.replica for v in read_replicas(redis_client, PREFIX)] == ["good:1"]
    assert "policy_version" in caplog.text


@pytest.mark.parametrize("bad", ["", "has space", "tab\there", "-leading-dash", "x" * 201, "new\nline", "a;b"])
def test_bad_replica_ids_are_refused_saying_what_is_allowed(bad):
    with pytest.raises(ValueError, match="letters, digits and"):
        check_replica_id(bad)
    with pytest.raises(ValueError, match="letters, digits and"):  # pydantic's ValidationError is one
        ReplicaStatus(replica=bad, policy_version=0, started_at=0, heartbeat_s=1, ttl_s=2)


def test_host_port_and_v6_ids_are_fine():
    for good in ("serve-1.internal:8000", "[::1]:8000", "10.0.0.7:8000", "pod/serve-0"):
        assert check_replica_id(good) == good


def test_a_long_error_is_cut():
    assert len(status("a:1", 0, last_error="x" * 10_000).last_error) == 500


def test_trajectories_carry_the_replica_and_old_records_still_decode():
    t = _minimal_trajectory()
    with_replica = t.model_copy(update={"replica": "host-a:8000"})
    assert load_msgpack(Trajectory, dump_msgpack(with_replica)).replica == "host-a:8000"
    old = msgpack.unpackb(dump_msgpack(t), raw=False)
    del old["replica"]  # a record written before the field existed
    assert load_msgpack(Trajectory, msgpack.packb(old, use_bin_type=True)).replica == ""
    with pytest.raises(ContractError, match="replica"):
        load_msgpack(Trajectory, msgpack.packb({**old, "replica": 7}, use_bin_type=True))


def _minimal_trajectory() -> Trajectory:
    return Trajectory(
        task_id="t1",
        policy_version=0,
        tokens=[1, 2],
        logprobs=[None, -0.5],
        segments=[{"start": 0, "end": 1, "kind": "user"}, {"start": 1, "end": 2, "kind": "summary"}],
    )
