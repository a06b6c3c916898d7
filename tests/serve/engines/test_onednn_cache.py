"""serve bounds oneDNN's primitive cache before an engine starts (its default let serve's RSS climb for as long as
new batch shapes arrived: `slca bench soak`)."""

import os

import pytest

from serve.engines import registry
from serve.engines.base import bound_onednn_cache, create_engine
from serve.engines.registry import EngineSpec
from serve.engines.settings import EngineSettings
from serve.settings import ServeSettings

VAR, LRU = "ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"


@pytest.fixture(autouse=True)
def _no_bounds_yet(monkeypatch):
    """Each test starts where no bound was set (a test run may have set them for its own processes)."""
    monkeypatch.delenv(VAR, raising=False)
    monkeypatch.delenv(LRU, raising=False)


def test_the_default_bound_is_set_on_onednns_cache_and_torchs_lru_of_it(monkeypatch):
    assert bound_onednn_cache(ServeSettings().onednn_primitive_cache)
    assert os.environ[VAR] == "64" and os.environ[LRU] == "64"


def test_the_operators_environment_wins_and_zero_leaves_onednns_default(monkeypatch):
    monkeypatch.setenv(VAR, "64")
    assert bound_onednn_cache(ServeSettings(onednn_primitive_cache=512).onednn_primitive_cache)  # the LRU only
    assert os.environ[VAR] == "64" and os.environ[LRU] == "512"
    assert not bound_onednn_cache(256)  # both set already: nothing changes
    monkeypatch.delenv(VAR)
    monkeypatch.delenv(LRU)
    assert not bound_onednn_cache(ServeSettings(onednn_primitive_cache=0).onednn_primitive_cache)
    assert VAR not in os.environ and LRU not in os.environ


def test_create_engine_bounds_the_cache_before_building_the_engine(monkeypatch):
    with pytest.raises(ValueError):  # an unknown engine is refused before anything changes
        create_engine("no-such-engine", "model", ServeSettings(onednn_primitive_cache=128))
    assert VAR not in os.environ
    monkeypatch.setitem(registry.ENGINES, "probe", EngineSpec("probe", Probe, EngineSettings, "a probe", False))
    create_engine("probe", "model", ServeSettings(onednn_primitive_cache=128))
    assert Probe.seen == "128"


class Probe:
    seen = None

    def __init__(self, model_dir, settings):
        Probe.seen = os.environ.get(VAR)


def test_the_learner_and_the_warm_start_bound_it_as_serve_does(monkeypatch):
    """A learner's groups arrive with new lengths as a server's prompts do: the 30-minute soak's learner (bf16,
    oneDNN's matmuls) rose ≈ 10 MiB per trained step with oneDNN's default of 1,024 entries."""
    from learner.settings import LearnerSettings
    from slca.heap import bound_onednn_cache as bound

    assert LearnerSettings().onednn_primitive_cache == 64
    assert bound(LearnerSettings().onednn_primitive_cache) and os.environ[VAR] == os.environ[LRU] == "64"
