"""One rollback path for every engine (`ServedModel._reload_or_roll_back` → `slca.weights.load_or_roll_back`): a swap
that fails midway on any registered engine leaves the previous version serving, restored whole, and says so the
same way (`WeightRollback`: "...; v1 restored"). hf runs on the tiny model; both vLLM modes over fake cores (the
driver and the swap logic are ours; vLLM's loader is what the fakes stand in for)."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch

from serve.settings import ServeSettings
from slca.weights import WeightRollback, WeightVersion, load_state_dict
from tests.support.weights import publish_version


def _fingerprint(state: dict) -> float:
    return round(float(state[min(state)].float().sum()), 3)


def test_hf_a_swap_failing_midway_leaves_the_previous_version_serving(tiny_model_dir, tmp_path):
    from serve.engines.base import SamplingParams, create_engine, generate

    v1, v2 = (WeightVersion(publish_version(tiny_model_dir, tmp_path, v, 1.0 + v / 100).path, v) for v in (1, 2))

    async def main():
        engine = create_engine("hf", str(tiny_model_dir), ServeSettings(engine="hf", torch_threads=1))
        await engine.start()
        try:
            await engine.swap_weights(v1)
            at_v1 = {n: p.detach().clone() for n, p in engine.model.named_parameters()}
            checked = engine._checked_state

            def poisoned(weights):  # the last assignment fails, after every other tensor of v2 is in
                state = checked(weights)
                state[list(state)[-1]] = "not a tensor"
                return state

            engine._checked_state = poisoned
            with pytest.raises(WeightRollback, match=r"reload failed .*; v1 restored") as failed:
                await engine.swap_weights(v2)
            engine._checked_state = checked
            whole = all(torch.equal(p, at_v1[n]) for n, p in engine.model.named_parameters())
            result = await generate(engine, [1, 2, 3], SamplingParams(max_tokens=2, seed=0))
            return failed.value, engine.version, engine.weights, whole, result.versions
        finally:
            await engine.close()

    error, version, weights, whole, versions = asyncio.run(main())
    assert version == 1 and weights is v1 and whole and versions == [1, 1], error


class _FakeCore:
    """vLLM's in-process engine core as the driver thread sees it, idle; a load of a version in `fail_on` (by the
    fingerprint of its tensors) fails midway."""

    def __init__(self, roots: list[str]):
        self.by_fingerprint = {_fingerprint(load_state_dict(r)): r for r in roots}
        self.fail_on: set[str] = set()
        self.loads: list[str] = []

    def collective_rpc(self, method, args: tuple = (), kwargs: dict | None = None) -> None:
        method(self, *args)  # serve/engines/vllm_worker_ext.py load_tensors, on this fake worker

    def reload_weights(self, weights_iterator) -> None:
        root = self.by_fingerprint[_fingerprint(dict(weights_iterator))]
        self.loads.append(root)
        if root in self.fail_on:
            raise RuntimeError("simulated: failed after loading some layers")

    def reset_prefix_cache(self) -> None:
        pass

    def has_unfinished_requests(self) -> bool:
        return False


def test_vllm_in_process_a_swap_failing_midway_leaves_the_previous_version_serving(tiny_model_dir, tmp_path):
    from serve.engines.vllm_engine import VLLMEngine

    v1, v2 = (WeightVersion(publish_version(tiny_model_dir, tmp_path, v, 1.0 + v / 100).path, v) for v in (1, 2))
    engine = VLLMEngine(str(tiny_model_dir), ServeSettings(engine="vllm"))
    core = engine.engine = _FakeCore([v1.root, v2.root])
    core.fail_on.add(v2.root)

    async def main():
        engine._thread = threading.Thread(target=engine._serve, daemon=True)  # the driver, over the fake core
        engine._thread.start()
        try:
            await engine.swap_weights(v1)
            with pytest.raises(WeightRollback, match=r"reload failed .*; v1 restored"):
                await engine.swap_weights(v2)
            return engine.version, engine.weights, engine.loaded
        finally:
            await engine.close()

    version, weights, loaded = asyncio.run(main())
    assert (version, weights, loaded) == (1, v1, True) and core.loads == [v1.root, v2.root, v1.root]


class _FakeAsyncLLM:
    """vLLM's `AsyncLLM` as the engine-core-process engine's swap sees it; a load of a root in `fail_on` fails."""

    errored = False

    def __init__(self):
        self.fail_on: set[str] = set()
        self.loads: list[str] = []
        self.label = "default"

    async def pause_generation(self, **_) -> None:
        pass

    async def resume_generation(self) -> None:
        pass

    async def collective_rpc(self, method, args: tuple = (), kwargs: dict | None = None) -> None:
        root = WeightVersion.from_wire(args[0]).root if args else kwargs["weights_path"]
        self.loads.append(root)
        if root in self.fail_on:
            raise RuntimeError("simulated: the worker failed after loading some layers")

    async def reset_prefix_cache(self) -> bool:
        return True

    async def update_weight_version(self, label: str) -> None:
        self.label = label


def test_vllm_engine_core_process_a_swap_failing_midway_leaves_the_previous_version_serving(tiny_model_dir, tmp_path):
    from serve.engines.vllm_async import VLLMAsyncEngine

    v1, v2 = (WeightVersion(publish_version(tiny_model_dir, tmp_path, v, 1.0 + v / 100).path, v) for v in (1, 2))
    engine = VLLMAsyncEngine(str(tiny_model_dir), ServeSettings(engine="vllm", vllm_engine_core_process=True))
    fake = engine.engine = _FakeAsyncLLM()
    fake.fail_on.add(v2.root)

    async def main():
        engine._swap_lock = asyncio.Lock()
        await engine.swap_weights(v1)
        with pytest.raises(WeightRollback, match=r"reload failed .*; v1 restored"):
            await engine.swap_weights(v2)
        return engine.version, engine.weights, engine.loaded

    version, weights, loaded = asyncio.run(main())
    assert (version, weights, loaded) == (1, v1, True)
    assert fake.loads == [v1.root, v2.root, v1.root] and fake.label == "1"
