"""The local backend: a frozen in-process model, guided by the response schema, with the schema fallback."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.schemas import is_valid
from sim.settings import SimSettings
from tests.sim.test_llm_backend import HEALTH, TOOL


def _run(settings: SimSettings, calls: int = 2):
    provider = make_provider(settings, None, CollectorRegistry())

    async def run():
        episode = await provider.new_episode([TOOL])
        return [await episode.call("check_service", {"service": f"api{i}"}) for i in range(calls)]

    return asyncio.run(run()), provider.ctx.backend


@pytest.mark.slow
def test_local_guided_answers_validate_and_the_model_stays_frozen(tiny_model_dir):
    settings = SimSettings(
        backend="local", local_model=str(tiny_model_dir), cache=False, real_packs=[], max_new_tokens=24
    )
    results, backend = _run(settings)
    for result in results:
        assert result.ok and is_valid(HEALTH, result.content)
        assert result.meta["source"] == "model"
    model = backend._model
    assert not model.training and not any(p.requires_grad for p in model.parameters())


@pytest.mark.slow
def test_local_unguided_falls_back_after_bounded_retries(tiny_model_dir):
    settings = SimSettings(
        backend="local",
        local_model=str(tiny_model_dir),
        local_guided=False,
        cache=False,
        real_packs=[],
        max_new_tokens=24,
        max_retries=1,
    )
    results, _ = _run(settings, calls=1)
    assert results[0].ok and is_valid(HEALTH, results[0].content)
    assert results[0].meta["source"] == "fallback" and results[0].meta["attempts"] == 2


@pytest.mark.slow
def test_local_answers_a_response_too_long_for_its_budget_from_the_synthesiser_at_once(tiny_model_dir):
    settings = SimSettings(
        backend="local", local_model=str(tiny_model_dir), cache=False, real_packs=[], max_new_tokens=8
    )
    results, backend = _run(settings, calls=1)
    assert results[0].ok and is_valid(HEALTH, results[0].content)
    assert results[0].meta["source"] == "fallback" and results[0].meta["attempts"] == 0
    assert backend._model is None  # the model was never needed


def test_missing_local_model_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no model at"):
        make_provider(
            SimSettings(backend="local", local_model=str(tmp_path / "none"), real_packs=[]), None, CollectorRegistry()
        )


def test_a_cached_model_name_needs_the_cache_the_caller_configured(tiny_model_dir, monkeypatch):
    """The backend reads no configuration itself: `tiny` resolves under the `cache_dir` its caller gives
    (`with_cache_of(common)`), and without one the error says how to give it. Not the environment's: a
    `SLCA_CACHE_DIR` pointing elsewhere must not be consulted by the backend."""
    from sim.backends.local import model_dir
    from slca.config import CommonSettings

    monkeypatch.setenv("SLCA_CACHE_DIR", "/nonexistent")
    with pytest.raises(ValueError, match="with_cache_of"):
        model_dir(SimSettings(local_model="tiny"))
    cache = tiny_model_dir.parent.parent  # <cache_dir>/models/tiny-smollm2
    settings = SimSettings(local_model="tiny").with_cache_of(CommonSettings(cache_dir=str(cache)))
    assert model_dir(settings) == tiny_model_dir
    assert SimSettings(local_model="tiny", cache_dir="/own").with_cache_of(CommonSettings()).cache_dir == "/own"
