"""Several serve replicas on one Redis (serve/replica.py): each records its own id on every trajectory, each announces
its status (listed by `slca.replicas.read_replicas`) at start and after every swap outcome, and withdraws it on a
clean stop; a replica fetching a version over HTTP moves the `slca_weights_fetch_*` counters on its /metrics and
announces the swap, then the refusal of a version whose bytes were changed. In-process apps, hf engine, tiny model."""

from __future__ import annotations

import asyncio
import re
import time
from contextlib import AsyncExitStack

import pytest
from aiohttp.test_utils import TestClient, TestServer

from serve.app import create_app
from serve.keys import ENGINE, REDIS, REPLICA, SWAPPER
from serve.replica import ReplicaIdentity
from serve.settings import ServeSettings
from slca.config import CommonSettings
from slca.contracts import Streams, Trajectory, decode_entry
from slca.replicas import read_replicas, read_replicas_async
from slca.weights import HttpTransport, announce
from tests.support.serve import ADMIN_TOKEN, agent_run_body
from tests.support.wait import wait_for_async
from tests.support.weights import WEIGHTS_KEY, publish_version, signed


def settings(**extra) -> ServeSettings:
    return ServeSettings(engine="hf", max_model_len=512, torch_threads=1, **extra)


async def start_apps(
    stack: AsyncExitStack, tiny_model_dir, redis_url: str, prefix: str, *configs: ServeSettings, weights=None
):
    """One app (its own engine, recorder, announcer) per settings, all on one Redis and prefix, like replicas;
    `weights`: their `[weights]` (None: verified with `WEIGHTS_KEY`, not following the channel)."""
    out = []
    for s in configs:
        common = CommonSettings(
            model=str(tiny_model_dir),
            redis_url=redis_url,
            stream_prefix=prefix,
            admin_token=ADMIN_TOKEN,
        )
        app = create_app(s, common, weights=weights or signed())
        out.append((await stack.enter_async_context(TestClient(TestServer(app))), app))
    return out


def test_each_replica_records_its_id_and_announces_itself(tiny_model_dir, serve_redis, rclient):
    prefix = "replicas2"
    ids = ("replica-a", "replica-b")

    async def main():
        async with AsyncExitStack() as stack:
            apps = await start_apps(
                stack,
                tiny_model_dir,
                serve_redis.url,
                prefix,
                *(
                    settings(replica_id=i, advertise_url=f"http://{i}.internal:8000", record_chat_share=1.0)
                    for i in ids
                ),
            )
            auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            for (client, app), replica in zip(apps, ids):
                r = await client.post("/v1/agent/runs", json=agent_run_body(f"task-{replica}"), headers=auth)
                assert r.status == 200, await r.text()
                chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "seed": 1}
                r = await client.post("/v1/chat/completions", json=chat, headers=auth)  # recorded: share 1
                assert r.status == 200, await r.text()
            client, app = apps[0]
            listed = await wait_for_async(
                lambda: _both_listed(app[REDIS], prefix, ids), 10, "both replicas' statuses in Redis"
            )
            return listed

    listed = asyncio.run(main())
    assert [(v.status.replica, v.status.url, v.status.policy_version, v.stale) for v in listed] == [
        ("replica-a", "http://replica-a.internal:8000", 0, False),
        ("replica-b", "http://replica-b.internal:8000", 0, False),
    ]
    recorded = [decode_entry(Trajectory, f) for _, f in rclient.xrange(Streams(prefix).trajectories)]
    by_replica = {}
    for t in recorded:
        by_replica.setdefault(t.replica, []).append(t.meta.get("source", "agent") + ":" + t.task_id.split("-")[0])
    # each replica's 2 agent rollouts and its recorded chat completion carry its own id
    assert sorted(by_replica) == list(ids) and all(len(v) == 3 for v in by_replica.values()), by_replica
    assert read_replicas(rclient, prefix) == []  # a clean stop withdraws the statuses


async def _both_listed(client, prefix, ids):
    views = await read_replicas_async(client, prefix)
    return views if [v.status.replica for v in views] == list(ids) else None


def test_the_default_id_is_host_and_port_and_the_url_names_a_reachable_host():
    s = ServeSettings(host="0.0.0.0", port=8123)
    assert ReplicaIdentity.of(s, hostname="serve-7") == ReplicaIdentity("serve-7:8123", "http://serve-7:8123")
    assert ReplicaIdentity.of(ServeSettings(host="::1", port=9), hostname="h").url == "http://[::1]:9"
    given = ServeSettings(replica_id="eu-1", advertise_url="https://eu-1.example/", port=1)
    assert ReplicaIdentity.of(given, hostname="h") == ReplicaIdentity("eu-1", "https://eu-1.example/")
    with pytest.raises(ValueError, match="set serve.replica_id"):
        ReplicaIdentity.of(ServeSettings(), hostname="bad host")


@pytest.mark.parametrize(
    "bad, says",
    [
        ({"replica_id": "a b"}, "letters, digits"),
        ({"advertise_url": "serve-1:8000"}, "http(s) URL"),
        ({"replica_heartbeat_s": 40}, "at least twice"),
        ({"replica_heartbeat_s": -1}, "greater than or equal"),
    ],
)
def test_bad_replica_settings_are_refused(bad, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        ServeSettings(**bad)


def _metric(page: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", page, re.M)
    assert match, f"{series} not on /metrics"
    return float(match.group(1))


def test_a_replica_fetching_over_http_counts_the_fetch_and_announces_each_swap(
    tiny_model_dir, serve_redis, rclient, tmp_path
):
    prefix = "replicashttp"
    learner = HttpTransport(tmp_path / "learner-host" / "weights", bind="127.0.0.1:0", key=WEIGHTS_KEY)
    learner.connect()
    v1, v2 = (
        publish_version(
            tiny_model_dir, learner.weights_dir, v, 1.0 + v / 20, url=learner.url_for(v), path=f"/nonexistent/v{v}"
        )
        for v in (1, 2)
    )
    with open(learner.weights_dir / "v2" / "model.safetensors", "r+b") as fh:  # changed after signing
        fh.seek(-4, 2)
        fh.write(b"\x00\x01\x02\x03")
    streams = Streams(prefix)
    announce(rclient, streams, v1)  # waiting in slca:weights:latest when the replica starts
    s = ServeSettings(
        engine="hf",
        max_model_len=512,
        torch_threads=1,
        replica_id="replica-http",
    )
    weights = signed(follow=True, transport="http", mirror_dir=str(tmp_path / "mirror"))

    async def main():
        async with AsyncExitStack() as stack:
            ((client, app),) = await start_apps(stack, tiny_model_dir, serve_redis.url, prefix, s, weights=weights)

            async def status_of(version: int, outcome: str):
                views = await read_replicas_async(app[REDIS], prefix)
                ok = views and views[0].status.last_swap_version == version and views[0].status.last_swap == outcome
                return views[0].status if ok else None

            after_v1 = await wait_for_async(lambda: status_of(1, "ok"), 120, "v1 fetched, swapped and announced")
            page_v1 = await (await client.get("/metrics")).text()
            await wait_for_async(lambda: _subscribed(app[REDIS], streams), 30, "the weight channel's subscriber")
            announce(rclient, streams, v2)
            after_v2 = await wait_for_async(lambda: status_of(2, "failed"), 120, "v2 refused and announced")
            page_v2 = await (await client.get("/metrics")).text()
            return after_v1, page_v1, after_v2, page_v2, app[ENGINE].version, app[SWAPPER].last_error, app[REPLICA]

    try:
        after_v1, page_v1, after_v2, page_v2, version, error, identity = asyncio.run(main())
    finally:
        learner.close()
    assert after_v1.policy_version == 1 and after_v1.last_error is None and identity.replica == "replica-http"
    sent = sum(f.stat().st_size for f in (learner.weights_dir / "v1").iterdir() if f.name != "manifest.json")
    assert _metric(page_v1, "slca_weights_fetch_bytes_total") == sent
    assert _metric(page_v1, "slca_weights_fetch_seconds_count") == 1
    assert _metric(page_v1, 'slca_weights_fetch_versions_total{outcome="verified"}') == 1
    assert _metric(page_v1, "slca_policy_version") == 1
    # v2's bytes differ from its signed manifest: refused, counted, announced; v1 keeps serving
    assert version == 1 and after_v2.policy_version == 1 and "checksum mismatch" in after_v2.last_error
    assert "checksum mismatch" in error
    assert _metric(page_v2, 'slca_weights_fetch_failures_total{reason="checksum"}') == 1
    assert _metric(page_v2, 'slca_weights_fetch_versions_total{outcome="refused"}') == 1
    assert _metric(page_v2, 'slca_swaps_total{outcome="failed"}') == 1


async def _subscribed(client, streams: Streams) -> bool:
    ((_, n),) = await client.pubsub_numsub(streams.weights_channel)
    return n > 0


class _SwallowingRedis:
    """A client whose commands absorb a cancel that lands in them and complete anyway (as redis-py 8.1 was seen to):
    `pipeline()` returns itself; `execute` takes `delay` seconds."""

    def __init__(self, delay: float):
        self.delay, self.executed, self.commands = delay, 0, []

    def pipeline(self, transaction=True):
        return self

    def __getattr__(self, name):  # set, zadd, zremrangebyscore, delete, zrem: recorded
        return lambda *args, **kwargs: self.commands.append(name)

    async def execute(self):
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            await asyncio.sleep(self.delay)  # swallowed: the command "completes"
        self.executed += 1
        return []


class _Swapper:
    last_outcome, last_outcome_version, last_outcome_at, last_error = "none", None, None, None


class _Engine:
    version = 3


@pytest.mark.timed
def test_the_announcer_stops_even_when_redis_absorbs_the_cancel():
    from serve.replica import ReplicaAnnouncer

    identity = ReplicaIdentity("r:1", "http://r:1")

    async def cancelled_mid_write():
        client = _SwallowingRedis(0.2)
        announcer = ReplicaAnnouncer(client, Streams("x"), identity, _Engine(), _Swapper(), 5.0, 60.0)
        task = asyncio.create_task(announcer.run())
        await asyncio.sleep(0.05)  # inside the first write
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=3)
        return done, client

    done, client = asyncio.run(cancelled_mid_write())
    assert done and next(iter(done)).cancelled() and client.executed == 1  # one write, no heartbeat after the cancel

    async def stopped():
        client = _SwallowingRedis(0.01)
        announcer = ReplicaAnnouncer(client, Streams("x"), identity, _Engine(), _Swapper(), 5.0, 60.0)
        task = asyncio.create_task(announcer.run())
        await asyncio.sleep(0.1)
        started = time.monotonic()
        await announcer.stop(task)
        return task.done(), time.monotonic() - started, client, announcer.status()

    finished, took, client, last = asyncio.run(stopped())
    assert finished and took < 1 and client.commands[-2:] == ["delete", "zrem"]  # withdrawn
    assert last.policy_version == 3 and last.last_swap == "none"
