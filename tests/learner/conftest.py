"""Fixtures of the learner tests: a `slca learn` subprocess against an owned Redis."""

from __future__ import annotations

import pytest
import redis as redis_lib
import torch

from slca.contracts import Streams
from tests.support.learner import LearnerProcess


@pytest.fixture
def learner_process(redis_url, tmp_path, tiny_model_dir):
    procs = []

    def make(**settings) -> LearnerProcess:
        p = LearnerProcess(redis_url, tmp_path, tiny_model_dir, {"precision": "fp32", "block_ms": 100, **settings})
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
