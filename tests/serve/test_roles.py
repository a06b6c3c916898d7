"""One serve replica per role (`serve.role`, serve/versions.py): a "promoted" replica's one engine holds the promoted
version for every request — it does not follow weight announcements, and moves on a promotion and on a rollback; a
"candidate" replica follows the announcements and answers every request with the candidate, its reported promoted
version following the shared record. Two in-process apps on one Redis, one data dir and one prefix (as `slca up`
runs them with `ops.candidate_replica`), hf engine on the tiny model: the mechanism is the same on every engine."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from aiohttp.test_utils import TestClient, TestServer

from serve.app import create_app
from serve.keys import REDIS, SWAPPER
from serve.settings import ServeSettings
from slca.config import CommonSettings
from slca.contracts import Streams
from slca.contracts.versions import PIN_HEADER, VERSION_HEADER
from slca.replicas import read_replicas_async
from slca.weights import HttpTransport, announce
from tests.support.wait import wait_for_async
from tests.support.weights import WEIGHTS_KEY, publish_version, signed

ADMIN, RECORD = "roles-admin", "roles-record"
ADMIN_H = {"Authorization": f"Bearer {ADMIN}"}
RECORD_H = {"Authorization": f"Bearer {RECORD}"}
PREFIX = "roles"


def role_settings(role: str, port: int) -> ServeSettings:
    return ServeSettings(
        engine="hf", max_model_len=512, torch_threads=1, promotion_poll_s=0.2, role=role, port=port,
        replica_id=f"replica-{role}",
    )  # fmt: skip


async def start(
    stack: AsyncExitStack, tiny_model_dir, redis_url: str, data_dir, role: str, port: int, weights=None, prefix=PREFIX
):
    common = CommonSettings(
        model=str(tiny_model_dir), redis_url=redis_url, stream_prefix=prefix, admin_token=ADMIN, record_key=RECORD,
        data_dir=str(data_dir),
    )  # fmt: skip
    weights = weights or signed(follow=True)  # both would follow by default
    app = create_app(role_settings(role, port), common, weights=weights)
    return await stack.enter_async_context(TestClient(TestServer(app))), app


async def version_of(client, headers=None) -> int:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "seed": 1}
    r = await client.post("/v1/chat/completions", json=body, headers=headers or {})
    answer = await r.json()
    assert r.status == 200, answer
    assert r.headers[VERSION_HEADER] == str(answer["policy_version"])
    return answer["policy_version"]


async def every_key(client) -> set[int]:
    """The versions a caller, the feed's record key and the admin token get from this replica."""
    return {await version_of(client, h) for h in ({}, RECORD_H, ADMIN_H)}


async def versions(client) -> dict:
    return await (await client.get("/v1/versions")).json()


async def promote(client, body: dict) -> dict:
    r = await client.post("/admin/promote", json=body, headers=ADMIN_H)
    assert r.status == 200, await r.text()
    return await r.json()


async def subscribers(client, streams: Streams) -> int:
    ((_, n),) = await client.pubsub_numsub(streams.weights_channel)
    return n


def test_a_promoted_replica_moves_only_on_promotions_and_a_candidate_replica_follows(
    tiny_model_dir, serve_redis, rclient, tmp_path
):
    data = tmp_path / "data"
    manifests = {v: publish_version(tiny_model_dir, data / "weights", v, 1.0 + v / 100) for v in (1, 2)}
    streams = Streams(PREFIX)

    async def main():
        async with AsyncExitStack() as stack:
            main_client, main_app = await start(stack, tiny_model_dir, serve_redis.url, data, "promoted", 18101)
            cand_client, _ = await start(stack, tiny_model_dir, serve_redis.url, data, "candidate", 18102)
            announce(rclient, streams, manifests[1])
            await wait_for_async(lambda: _candidate_is(cand_client, 1), 60, "the candidate replica on v1")
            assert await every_key(cand_client) == {1}  # callers of this replica too: it serves the candidate only
            await asyncio.sleep(1.0)  # a follower would have swapped (or tried) by now, as the candidate replica did
            # only the candidate replica listens to the weight channel: the promoted one never even tried a swap
            assert await subscribers(main_app[REDIS], streams) == 1 and main_app[SWAPPER].last_outcome == "none"
            assert await every_key(main_client) == {0}  # callers and the system's keys: the promoted v0
            seen = await versions(main_client)
            assert (seen["role"], seen["promoted"], seen["engines"]) == ("promoted", 0, {"promoted": 0})

            assert (await promote(main_client, {"version": 1}))["promoted"] == 1
            assert await every_key(main_client) == {1}
            announce(rclient, streams, manifests[2])
            await wait_for_async(lambda: _candidate_is(cand_client, 2), 60, "the candidate replica on v2")
            await wait_for_async(lambda: _promoted_is(cand_client, 1), 60, "the record followed by the candidate")
            assert await every_key(main_client) == {1} and await every_key(cand_client) == {2}

            assert (await promote(main_client, {"version": 2}))["promoted"] == 2
            assert await every_key(main_client) == {2}
            after = await promote(main_client, {"rollback": True})
            assert (after["promoted"], after["rolled_back"]) == (1, [2])
            assert await every_key(main_client) == {1}  # rolled back: the one engine went back to v1
            assert await version_of(cand_client) == 2  # the candidate's engine stays on the candidate
            after = await promote(main_client, {"rollback": True})  # to v0, the base model: a fresh hf engine
            assert after["promoted"] == 0 and await every_key(main_client) == {0}
            assert await version_of(main_client, {PIN_HEADER: "0", **RECORD_H}) == 0
            metrics = await (await main_client.get("/metrics")).text()
            assert "slca_policy_version 0.0" in metrics  # the promoted replica's served version, moved by promotions
            roles = await wait_for_async(lambda: _roles(main_app[REDIS]), 30, "both replicas' statuses, with roles")
            return roles, await versions(cand_client)

    roles, cand = asyncio.run(main())
    assert roles == {"replica-promoted": ("promoted", 0), "replica-candidate": ("candidate", 2)}
    assert (cand["role"], cand["candidate"], cand["engines"]) == ("candidate", 2, {"candidate": 2})


def test_promoted_replicas_on_other_hosts_fetch_a_promoted_version_from_the_learner(
    tiny_model_dir, serve_redis, tmp_path
):
    """No shared disk: the learner serves its versions over HTTP (`weights.bind`), each promoted replica has a data
    dir of its own and `weights.url`. A promotion fetches the version first (verified as the follower's fetch is);
    the other replica fetches it when it follows the record. One the learner does not have is 404, one whose bytes
    differ from its signed manifest 422: refused, nothing changes, nothing of it kept."""
    learner = HttpTransport(tmp_path / "learner-host" / "weights", bind="127.0.0.1:0", key=WEIGHTS_KEY)
    learner.connect()
    for v in (1, 2, 3):
        publish_version(tiny_model_dir, learner.weights_dir, v, 1.0 + v / 100, url=learner.url_for(v), path=f"/x/v{v}")
    with open(learner.weights_dir / "v3" / "model.safetensors", "r+b") as fh:  # changed after signing
        fh.seek(-4, 2)
        fh.write(b"\x00\x01\x02\x03")
    hosts = [tmp_path / "host-a", tmp_path / "host-b"]
    weights = [signed(transport="http", url=learner.base_url, mirror_dir=str(h / "mirror")) for h in hosts]
    prefix = "rolesfetch"

    async def main():
        async with AsyncExitStack() as stack:
            a, _ = await start(stack, tiny_model_dir, serve_redis.url, hosts[0], "promoted", 18111, weights[0], prefix)
            b, _ = await start(stack, tiny_model_dir, serve_redis.url, hosts[1], "promoted", 18112, weights[1], prefix)
            assert (await promote(a, {"version": 1}))["promoted"] == 1
            assert await every_key(a) == {1}
            await wait_for_async(lambda: _serves(b, 1), 60, "the other host's replica fetching v1 from the record")
            refused = {}
            for version in (9, 3):  # never published; its bytes changed after signing
                r = await a.post("/admin/promote", json={"version": version}, headers=ADMIN_H)
                refused[version] = (r.status, (await r.json())["error"]["code"])
            assert (await versions(a))["record"]["promoted"] == 1 and await every_key(a) == {1}
            assert (await promote(a, {"version": 2}))["promoted"] == 2
            await wait_for_async(lambda: _serves(b, 2), 60, "the other host's replica fetching v2")
            after = await promote(a, {"rollback": True})
            assert after["promoted"] == 1 and await every_key(a) == {1}
            metrics = await (await a.get("/metrics")).text()
            return refused, metrics

    try:
        refused, metrics = asyncio.run(main())
    finally:
        learner.close()
    assert refused == {9: (404, "version_not_found"), 3: (422, "version_unverified")}
    assert 'slca_weights_fetch_failures_total{reason="checksum"} 1.0' in metrics
    assert 'slca_weights_fetch_versions_total{outcome="verified"} 2.0' in metrics  # v1 and v2, once each
    for host in hosts:
        assert not (host / "weights").exists()  # nothing on a shared disk: every version came over HTTP
        assert not (host / "mirror" / "fetched" / "v3").exists()


async def _serves(client, version: int) -> bool:
    seen = await versions(client)
    return seen["promoted"] == version and seen["engines"] == {"promoted": version}


async def _candidate_is(client, version: int) -> bool:
    return (await versions(client))["candidate"] == version


async def _promoted_is(client, version: int) -> bool:
    return (await versions(client))["promoted"] == version


async def _roles(client) -> dict | None:
    views = await read_replicas_async(client, PREFIX)
    found = {v.status.replica: (v.status.role, v.status.policy_version) for v in views}
    return found if found.get("replica-promoted") == ("promoted", 0) and len(found) == 2 else None
