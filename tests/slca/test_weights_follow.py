"""The weight follower (slca/weights/swap.py `WeightSwapper.follow`) after a restart or a bad moment: it loads the
newest announcement rather than a backlog one by one, tries a failed swap again (after a back-off, with the newest
announcement by then), and refuses a manifest whose signature is not even ASCII without stopping to follow."""

from __future__ import annotations

import asyncio
import re

from prometheus_client import CollectorRegistry, generate_latest

from serve.metrics import ServeMetrics
from slca.contracts import Streams, WeightManifest
from slca.weights import ManifestPolicy, WeightSwapper, WeightVersion
from tests.support.weights import WEIGHTS_KEY


def _announcement(version: int, signature: str | None = None) -> str:
    manifest = WeightManifest(
        version=version, path=f"/w/v{version}", sha256={"model.safetensors": "0" * 64}, base_model="tiny"
    ).signed(WEIGHTS_KEY)
    if signature is not None:
        manifest = manifest.model_copy(update={"signature": signature})
    return manifest.model_dump_json()


class _Engine:
    """Swaps by version. `gate[v]`: the swap to v waits for that event; `failures[v]`: how many times it fails first."""

    def __init__(self, gate: dict | None = None, failures: dict | None = None):
        self.version, self.gate, self.failures = 0, gate or {}, dict(failures or {})
        self.tried: list[int] = []
        self.loaded = asyncio.Queue()

    async def swap_weights(self, weights: WeightVersion) -> float:
        self.tried.append(weights.version)
        if weights.version in self.gate:
            await self.gate[weights.version].wait()
        if self.failures.get(weights.version, 0):
            self.failures[weights.version] -= 1
            raise RuntimeError(f"simulated: v{weights.version} failed to load")
        self.version = weights.version
        self.loaded.put_nowait(weights.version)
        return 0.01


class _InPlace:
    def fetch(self, manifest):
        return WeightVersion(manifest.path, manifest.version, manifest)

    def retain(self, versions) -> None:
        pass


class _Channel:
    """A Redis client whose `slca:weights:latest` is `latest` and whose channel delivers what `send` puts in."""

    def __init__(self, latest: str | None = None):
        self.latest, self.messages = latest, asyncio.Queue()

    async def get(self, key: str):
        return self.latest

    def send(self, raw: str) -> None:
        self.messages.put_nowait(raw)

    def pubsub(self):
        return self

    async def subscribe(self, channel: str) -> None:
        pass

    async def listen(self):
        while True:
            yield {"type": "message", "data": await self.messages.get()}

    async def aclose(self) -> None:
        pass


def _swapper(engine, **kwargs) -> WeightSwapper:
    policy = ManifestPolicy(WEIGHTS_KEY)
    return WeightSwapper(engine, ServeMetrics(CollectorRegistry()), policy=policy, transport=_InPlace(), **kwargs)


async def _next_load(engine: _Engine, timeout: float = 10.0) -> int:
    return await asyncio.wait_for(engine.loaded.get(), timeout)


async def _until(condition, what: str, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_backlog_of_announcements_is_loaded_as_its_newest_only():
    async def main():
        gate = asyncio.Event()
        engine = _Engine(gate={1: gate})
        channel = _Channel()
        follow = asyncio.create_task(_swapper(engine).follow(channel, Streams("t")))
        channel.send(_announcement(1))
        await _until(lambda: engine.tried == [1], "v1 to load")  # v1 is loading (a vLLM reload takes seconds) ...
        for version in (2, 3, 4):  # ... while three more versions are announced
            channel.send(_announcement(version))
        await _until(channel.messages.empty, "the announcements to be read while v1 loads", timeout=2.0)
        gate.set()
        loads = [await _next_load(engine), await _next_load(engine)]
        await asyncio.sleep(0.1)
        follow.cancel()
        return loads, engine.tried

    loads, tried = asyncio.run(main())
    assert loads == [1, 4] and tried == [1, 4]  # v2 and v3 were never loaded: v4 was already announced


def test_a_failed_swap_is_tried_again_after_a_back_off():
    async def main():
        engine = _Engine(failures={5: 2})  # v5 fails twice (a disk hiccup, a fetch that timed out), then loads
        swapper = _swapper(engine, swap_retry_s=0.05, swap_retry_max_s=0.2)
        follow = asyncio.create_task(swapper.follow(_Channel(latest=_announcement(5)), Streams("t")))
        loaded = await _next_load(engine)
        follow.cancel()
        return loaded, engine.tried, swapper.last_outcome

    loaded, tried, outcome = asyncio.run(main())
    assert loaded == 5 and tried == [5, 5, 5] and outcome == "ok"


def test_a_retry_takes_the_newest_announcement_at_once():
    async def main():
        engine = _Engine(failures={5: 10**6})  # v5 never loads (its files are gone)
        channel = _Channel(latest=_announcement(5))
        follow = asyncio.create_task(_swapper(engine, swap_retry_s=30.0).follow(channel, Streams("t")))
        await _until(lambda: engine.tried, "v5 to be tried")
        channel.send(_announcement(6))  # well before the 30 s back-off is over
        loaded = await _next_load(engine, timeout=5.0)
        follow.cancel()
        return loaded, engine.tried

    loaded, tried = asyncio.run(main())
    assert loaded == 6 and tried == [5, 6]


def test_a_non_ascii_signature_is_refused_and_following_goes_on():
    weird = _announcement(3, signature="é" * 64)  # hmac.compare_digest raised TypeError on such a str

    async def main():
        engine = _Engine()
        swapper = _swapper(engine, retry_s=0.01)
        channel = _Channel(latest=weird)  # what every reconnection reads first
        follow = asyncio.create_task(swapper.follow(channel, Streams("t")))
        channel.send(weird)
        channel.send(_announcement(2))
        loaded = await _next_load(engine)
        follow.cancel()
        return loaded, generate_latest(swapper.metrics.registry).decode()

    loaded, metrics = asyncio.run(main())
    assert loaded == 2 and re.search(r'^slca_swaps_total\{outcome="refused"\} [1-9]', metrics, re.M)
    assert not WeightManifest.model_validate_json(weird).signature_valid(WEIGHTS_KEY)


def test_every_swap_attempt_ends_with_the_after_swap_hook():
    """serve hands `slca.heap.trim` here: what a swap, done or failed, freed under the mmap threshold goes back."""

    async def main():
        engine, calls = _Engine(failures={2: 1}), []
        swapper = _swapper(engine, after_swap=lambda: calls.append(engine.version))
        await swapper.swap(1, manifest=WeightManifest.model_validate_json(_announcement(1)))
        try:
            await swapper.swap(2, manifest=WeightManifest.model_validate_json(_announcement(2)))
        except Exception:  # noqa: BLE001 - the failed swap is the point
            pass
        return calls

    assert asyncio.run(main()) == [1, 1]  # after v1 loaded; after v2 failed (v1 still served)
