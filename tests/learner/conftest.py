"""Fixtures of the learner tests: the online loop's context, a `slca learn` subprocess against an owned Redis."""

from __future__ import annotations

import pytest
import redis as redis_lib
import torch

from slca.contracts import Streams
from tests.support.learner import MECHANICS, LearnerProcess


@pytest.fixture
def loop_context(redis_client, redis_url, tmp_path, tiny_model_dir):
    """`loop_context(**learner_settings)`: a `LoopContext` for `run_learner` on the tiny model, the owned Redis and
    `tmp_path` (fp32, 100 ms reads, lr 1e-4, the loop's mechanics: one group per step, no screening, unless
    overridden)."""
    from prometheus_client import CollectorRegistry

    from learner.loop import LoopContext
    from learner.metrics import LearnerMetrics
    from learner.settings import LearnerSettings
    from slca.config import CommonSettings

    def make(**overrides) -> LoopContext:
        settings = LearnerSettings(**{**MECHANICS, "precision": "fp32", "block_ms": 100, "lr": 1e-4, **overrides})
        common = CommonSettings(redis_url=redis_url, data_dir=str(tmp_path))
        (tmp_path / "learner").mkdir(exist_ok=True)
        return LoopContext(
            settings,
            common,
            redis_client,
            tmp_path / "learner",
            tmp_path / "weights",
            tiny_model_dir,
            LearnerMetrics.create(CollectorRegistry()),
        )

    return make


@pytest.fixture
def learner_process(redis_url, tmp_path, tiny_model_dir):
    procs = []

    def make(**settings) -> LearnerProcess:
        p = LearnerProcess(
            redis_url, tmp_path, tiny_model_dir, {**MECHANICS, "precision": "fp32", "block_ms": 100, **settings}
        )
        procs.append(p)
        return p

    yield make
    for p in procs:
        p.kill()


@pytest.fixture
def rollout_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    torch.set_num_threads(1)  # the CI machine has 2 shared cores: one thread each for sampler and learner
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    model.eval()
    return model, AutoTokenizer.from_pretrained(str(tiny_model_dir))


@pytest.fixture
def streams():
    return Streams("slca")


@pytest.fixture
def sync_client(redis_url):
    client = redis_lib.Redis.from_url(redis_url)
    yield client
    client.close()
