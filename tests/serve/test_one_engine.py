"""An engine that holds one model per process (`one_per_process`, vLLM on CPU: a second in-process engine crashed
serve) keeps every role: callers follow the candidate's swaps, a promotion moves that engine, and a pin of a version
it does not hold is refused (409), never built beside it. No model: the router's decisions alone."""

import asyncio

import pytest

from serve.settings import ServeSettings
from serve.version_store import OneEngineOnly
from serve.versions import VersionRouter


class OneModelEngine:
    name = "vllm"
    one_per_process = True

    def __init__(self):
        self.version, self.swaps = 0, []

    async def swap_weights(self, weights) -> float:
        self.swaps.append(weights.version)
        self.version = weights.version
        return 0.01


class Weights:
    def __init__(self, version: int):
        self.version = version


class Store:
    def exists(self, version: int) -> bool:
        return True

    def resolve(self, version: int):
        return Weights(version)


def never_built():
    pytest.fail("a second engine was built beside a one-per-process engine")


def test_one_engine_per_process_keeps_every_role_and_refuses_other_versions():
    async def run():
        engine = OneModelEngine()
        router = VersionRouter(engine, never_built, ServeSettings(), Store())
        assert router.one_engine and not router.settings.follow_candidate
        await router.swap_weights(Weights(1))  # the gate's default would build a promoted engine here
        assert engine.swaps == [1] and router.promoted == 1 and router.promoted_slot is None
        await router.promote(1)  # the version it holds: nothing to build
        await router.promote(2)  # another version (the warm start's handover promotes before announcing): it moves
        assert engine.swaps == [1, 2] and router.promoted == 2 and router.promoted_slot is None
        with pytest.raises(OneEngineOnly, match="one model per process"):
            await router._pinned(0)  # a pin of a version it does not hold
        assert OneEngineOnly.status == 409 and router.promoted == 2

    asyncio.run(run())
