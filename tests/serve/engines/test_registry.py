"""The engine registry (serve/engines/registry.py): every engine is looked up by name, an unknown name is refused
listing the registered ones, each engine's settings class is part of `[serve]`, and an engine registered from any
module (here, a toy one from this test module) is what serve's engine factory builds when `serve.engine` names it."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

import pytest

from serve.engines.base import ServedModel, TokenStep
from serve.engines.hf_settings import HFEngineSettings
from serve.engines.registry import ENGINES, UnknownEngineError, create_engine, engine_names, engine_spec
from serve.engines.registry import register_engine
from serve.engines.settings import EngineSettings
from serve.engines.vllm_settings import VLLMEngineSettings
from serve.settings import ServeSettings
from slca.config import ConfigError, load_config
from slca.contracts.engine import Engine
from slca.weights import WeightVersion
from tests.support.serve import run_in_app


def test_the_shipped_engines_are_registered_with_their_settings():
    assert {"hf", "vllm"} <= set(engine_names())
    assert engine_spec("hf").settings is HFEngineSettings and engine_spec("vllm").settings is VLLMEngineSettings
    assert engine_spec("hf").threads_from_plan and not engine_spec("vllm").threads_from_plan
    # their keys are [serve]'s, validated there
    assert isinstance(ServeSettings(), HFEngineSettings) and isinstance(ServeSettings(), VLLMEngineSettings)
    assert ServeSettings(hf_concurrent_batches=2, kv_cache_gib=0.5).kv_cache_gib == 0.5


def test_an_unknown_engine_is_refused_listing_the_registered_ones():
    with pytest.raises(UnknownEngineError, match=r"unknown engine 'nope'; registered: .*hf, .*vllm"):
        create_engine("nope", "model", ServeSettings())
    with pytest.raises(ConfigError, match=r"serve\.engine: .*unknown engine 'nope'; registered: .*hf"):
        load_config(overrides=["serve.engine=nope"]).section("serve")


def test_an_engine_name_is_registered_once():
    with pytest.raises(ValueError, match="registered twice"):
        register_engine("hf")(ToyEngine)


class ToyEngine(ServedModel):
    """A toy engine: answers every prompt with the word 'toy'."""

    name = "toy"

    def __init__(self, model_dir: str, settings) -> None:
        super().__init__(model_dir, settings)
        self.started = False

    @property
    def loaded(self) -> bool:
        return self.started

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.started = False

    async def stream(self, prompt_ids, params) -> AsyncIterator[TokenStep]:
        ids = self.tokenizer.encode("toy", add_special_tokens=False)
        yield TokenStep(ids, [0.0] * len(ids), self.version, "stop")

    async def swap_weights(self, weights: WeightVersion) -> float:
        self.version = weights.version
        return 0.0


@pytest.fixture
def toy_registered():
    register_engine("toy")(ToyEngine)  # what the engine's own module does at import
    yield
    ENGINES.pop("toy")


def test_serves_engine_factory_builds_a_registered_toy_engine_by_name(toy_registered, tiny_model_dir, serve_redis):
    from serve.versions import router_of

    async def scenario(client, app):
        engine = router_of(app).primary.engine
        r = await client.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        )
        return engine, engine.started, r.status, await r.json()

    settings = ServeSettings(engine="toy", max_model_len=512)
    engine, started, status, body = asyncio.run(
        run_in_app(tiny_model_dir, serve_redis.url, scenario, settings=settings)
    )
    assert isinstance(engine, ToyEngine) and isinstance(engine, Engine) and started
    assert status == 200 and body["choices"][0]["message"]["content"] == "toy"
    assert engine_spec("toy").settings is EngineSettings and "toy" in engine_names()
