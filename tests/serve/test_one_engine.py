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
        return None if version == 0 else Weights(version)  # v0, the base model, has no manifest


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


def test_a_promoted_replica_of_a_one_per_process_engine_moves_only_on_promotions():
    from serve.versions import ROUTE, Route
    from slca.weights import WeightLoadError

    async def run():
        engine = OneModelEngine()
        router = VersionRouter(engine, never_built, ServeSettings(role="promoted"), Store())
        with pytest.raises(WeightLoadError, match="serve.role=promoted"):
            await router.swap_weights(Weights(1))  # an announced version (or an admin's swap) never moves it
        assert engine.swaps == [] and router.promoted == 0
        await router.promote(3)
        assert engine.swaps == [3] and router.promoted == 3 and router.loaded_versions() == {"promoted": 3}
        for kind in ("caller", "candidate"):  # callers and the system's own keys alike
            route = Route(kind=kind)
            ROUTE.set(route)
            assert (await router._slot_of(route)).engine is engine and router.version == 3
        with pytest.raises(OneEngineOnly):
            await router._pinned(2)  # the same 409 as with both roles
        with pytest.raises(OneEngineOnly, match="no manifest"):
            await router.promote(0)  # the base model cannot be loaded into the one engine
        assert router.promoted == 3

    asyncio.run(run())


def test_a_candidate_replica_of_a_one_per_process_engine_follows_and_keeps_the_record_apart():
    from serve.versions import Route

    async def run():
        engine = OneModelEngine()
        router = VersionRouter(engine, never_built, ServeSettings(role="candidate"), Store())
        await router.swap_weights(Weights(1))
        await router.swap_weights(Weights(2))
        await router.promote(1)  # the record moved (the promoted replica loads it): this engine stays
        assert engine.swaps == [1, 2] and (router.promoted, router.candidate) == (1, 2)
        route = Route(kind="caller")
        assert (await router._slot_of(route)).engine is engine and route.kind == "candidate"  # not a guarded caller

    asyncio.run(run())


class BaseLoadingEngine(OneModelEngine):
    """vLLM's engines: v0, which has no manifest, is loaded from the model directory in place (`load_base`)."""

    async def load_base(self) -> float:
        self.swaps.append("base")
        self.version = 0
        return 0.01


@pytest.mark.parametrize("role", ["both", "promoted"])
def test_the_one_engine_rolls_back_to_the_base_model_in_place(role):
    """The live-signal guard's rollback from the warm start (v1) to v0 used to be refused ("v0 has no manifest to
    load into the one vllm engine"): callers stayed on the version judged worse."""

    async def run():
        engine = BaseLoadingEngine()
        router = VersionRouter(engine, never_built, ServeSettings(role=role), Store())
        await router.promote(1)
        assert router.promoted == 1 and engine.version == 1
        await router.promote(0)
        return engine.swaps, router.promoted, engine.version, router.loaded_versions()

    swaps, promoted, version, loaded = asyncio.run(run())
    assert swaps == [1, "base"] and promoted == 0 and version == 0
    assert 0 in loaded.values() and 1 not in loaded.values()
