"""The learner's consumer of `slca:groups` against a real Redis (docs/design.md#queues): a stable consumer name, so a
restarted learner resumes its own pending groups; XAUTOCLAIM of groups left pending by a consumer that died."""

from __future__ import annotations

import time

import pytest

from learner.consumer import GroupConsumer, consumer_name
from slca.contracts import Streams, encode_entry
from tests.learner.advantages.groups import K, reward, rollout_group
from tests.support.trajectories import trajectory

SPEC = [(K.SYSTEM, 1), (K.TOOL_CALL, 2), (K.TOOL_RESULT, 1), (K.SUMMARY, 2)]


def add_groups(client, streams: Streams, n: int) -> list[bytes]:
    ids = []
    for i in range(n):
        group = rollout_group([trajectory(SPEC), trajectory(SPEC)], [reward(0, 1.0, 0.0), reward(1, 0.0, 1.0)])
        ids.append(client.xadd(streams.groups, encode_entry(group, id=f"g{i}")))
    return ids


def test_consumer_name_is_stable_across_hosts_and_world_sizes__configurable(monkeypatch):
    """Under torchrun only rank 0 reads groups, under the name one process uses: a learner moved between one
    process and N finds its own pending groups."""
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr("socket.gethostname", lambda: "pod-7f9c")
    assert consumer_name(None) == "learner-0"
    assert consumer_name("trainer-a") == "trainer-a"
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert consumer_name(None) == "learner-0"
    assert consumer_name("trainer-a") == "trainer-a"


def test_restarted_learner_resumes_its_own_pending_groups(redis_client, monkeypatch):
    streams = Streams("slca")
    ids = add_groups(redis_client, streams, 2)
    monkeypatch.setattr("socket.gethostname", lambda: "host-before")
    first = GroupConsumer(redis_client, streams, "learner", consumer_name(None))
    assert [e.entry_id for e in first.read(2, 50)] == ids  # applied, not yet checkpointed: never acknowledged
    monkeypatch.setattr("socket.gethostname", lambda: "host-after")  # the restart lands on another host
    again = GroupConsumer(redis_client, streams, "learner", consumer_name(None))
    assert [e.entry_id for e in again.read(1, 50)] == ids[:1]
    assert [e.entry_id for e in again.read(1, 50)] == ids[1:]  # each pending entry once, though none is acked
    assert again.read(1, 50) == []
    assert {c["name"] for c in redis_client.xinfo_consumers(streams.groups, "learner")} == {b"learner-0"}


def test_groups_pending_on_a_dead_consumer_are_claimed_once_idle_past_the_deadline(redis_client):
    streams = Streams("slca")
    ids = add_groups(redis_client, streams, 3)
    dead = GroupConsumer(redis_client, streams, "learner", "learner-old-name")
    assert [e.entry_id for e in dead.read(2, 50)] == ids[:2]  # then it dies holding them
    live = GroupConsumer(redis_client, streams, "learner", "learner-0", claim_idle_ms=300)
    assert [e.entry_id for e in live.read(5, 50)] == ids[2:]  # not idle long enough yet: only the new one
    time.sleep(0.4)
    claimed = live.read(5, 50)  # its own ids[2], as idle, is taken back by XAUTOCLAIM but not handed out twice
    assert [e.entry_id for e in claimed] == ids[:2] and all(e.group is not None for e in claimed)
    pending = redis_client.xpending_range(streams.groups, "learner", "-", "+", 10)
    assert {p["consumer"] for p in pending} == {b"learner-0"}


@pytest.mark.parametrize("touched", [True, False])
def test_keep_alive_keeps_a_live_learners_held_groups_from_being_claimed(redis_client, touched):
    streams = Streams("slca")
    ids = add_groups(redis_client, streams, 1)
    holder = GroupConsumer(redis_client, streams, "learner", "learner-0", claim_idle_ms=1000)
    assert [e.entry_id for e in holder.read(1, 50)] == ids  # held until the step that used it is checkpointed
    time.sleep(1.1)
    if touched:
        holder.keep_alive()
    other = GroupConsumer(redis_client, streams, "learner", "learner-1", claim_idle_ms=1000)
    assert [e.entry_id for e in other.read(1, 50)] == ([] if touched else ids)
