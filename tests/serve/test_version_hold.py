"""Holding the candidate at one version while it is judged (serve/version_hold.py): a candidate replica (hf, the tiny
model) held at the version it serves answers pins of it while announcements arrive, refuses a hold of a version it
moved past, lets no one without the admin token hold it, and follows the newest announcement once released or once
the hold's time is up."""

from __future__ import annotations

import asyncio
import shutil
from contextlib import AsyncExitStack

from serve.keys import ENGINE, SWAPPER
from serve.candidate_hold import CandidateHold
from slca.contracts import Streams
from slca.contracts.versions import PIN_HEADER
from slca.weights import announce
from tests.serve.test_roles import ADMIN_H, PREFIX, RECORD_H, start, version_of
from tests.support.wait import wait_for_async
from tests.support.weights import publish_version


async def _serves(client, version: int) -> bool:
    return await version_of(client, RECORD_H) == version


def test_a_held_candidate_answers_its_pins_while_announcements_wait_then_follows_the_newest(
    tiny_model_dir, serve_redis, rclient, tmp_path
):
    data = tmp_path / "data"
    manifests = {v: publish_version(tiny_model_dir, data / "weights", v, 1.0 + v / 100) for v in (1, 2, 3, 4)}
    streams = Streams(PREFIX)

    async def main():
        async with AsyncExitStack() as stack:
            client, app = await start(stack, tiny_model_dir, serve_redis.url, data, "candidate", 18111)
            announce(rclient, streams, manifests[1])
            await wait_for_async(lambda: _serves(client, 1), 60, "the candidate on v1")

            refused = await client.post("/admin/hold", json={"version": None, "seconds": 60}, headers=RECORD_H)
            assert refused.status in (401, 403)  # the record key may not hold the learner's swaps
            bad = await client.post("/admin/hold", json={"version": None, "seconds": -1}, headers=ADMIN_H)
            assert bad.status == 400 and (await bad.json())["error"]["param"] == "seconds"
            r = await client.post("/admin/hold", json={"version": None, "seconds": 60}, headers=ADMIN_H)
            assert r.status == 200 and (await r.json())["held"] == 1
            shutil.rmtree(data / "weights" / "v1")  # the learner pruned it: the held copy is still found
            assert app[ENGINE].store.resolve(1).version == 1

            announce(rclient, streams, manifests[2])

            async def swap_waits() -> bool:  # the follower wants v2 and waits for the hold
                wanted = app[SWAPPER].wanted
                return wanted is not None and wanted.version == 2

            await wait_for_async(swap_waits, 30, "the follower's swap to v2 waiting")
            assert await version_of(client, {PIN_HEADER: "1", **RECORD_H}) == 1  # pinned runs of v1 still answer
            assert await version_of(client, RECORD_H) == 1
            moved = await client.post("/admin/hold", json={"version": 2, "seconds": 60}, headers=ADMIN_H)
            assert moved.status == 409 and (await moved.json())["error"]["code"] == "candidate_moved"
            held = (await (await client.get("/v1/versions", headers=RECORD_H)).json())["hold"]  # `slca status` shows it
            assert held["version"] == 1 and 0 < held["left_s"] <= 60

            released = await client.delete("/admin/hold", headers=ADMIN_H)
            assert released.status == 200 and (await released.json())["held"] is None
            assert "hold" not in await (await client.get("/v1/versions", headers=RECORD_H)).json()
            await wait_for_async(lambda: _serves(client, 2), 60, "the candidate on v2 once released")

            r = await client.post("/admin/hold", json={"version": 2, "seconds": 3.0}, headers=ADMIN_H)
            assert (await r.json())["held"] == 2
            assert sorted(p.name for p in (data / "held-weights").iterdir()) == ["v2"]  # one held version kept
            swaps = app[SWAPPER].metrics.swaps.labels(outcome="ok")
            before = swaps._value.get()
            announce(rclient, streams, manifests[3])

            async def wants_v3() -> bool:
                wanted = app[SWAPPER].wanted
                return wanted is not None and wanted.version == 3

            await wait_for_async(wants_v3, 30, "the follower wanting v3")
            await asyncio.sleep(0.3)  # the loader has taken v3 up (a follower that fetched it then would swap to it)
            announce(rclient, streams, manifests[4])
            # nobody releases it: once its second is up the follower loads the newest announcement, and only it
            await wait_for_async(lambda: _serves(client, 4), 60, "the candidate on v4 after the hold's time")
            assert swaps._value.get() - before == 1  # v3, announced during the hold, was never loaded

    asyncio.run(main())


def test_a_hold_is_capped_and_a_release_ends_the_wait():
    async def main():
        hold = CandidateHold(max_s=0.2)
        assert hold.hold(3, 3600) == 0.2 and hold.active and hold.version == 3
        await asyncio.wait_for(hold.wait(), 2)  # its time is up after 0.2 s, not an hour
        assert not hold.active
        hold.hold(4, 0.2)
        hold.max_s = 60
        hold.hold(4, 60)
        waiting = asyncio.create_task(hold.wait())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        hold.release()
        await asyncio.wait_for(waiting, 1)

    asyncio.run(main())
