"""Fixtures of the sim tests: providers over SGLS with an owned Redis and a private metrics registry."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.settings import SimSettings


@pytest.fixture
def metrics_registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def make_sim(redis_url, metrics_registry):
    """Build providers with settings overrides; closes them at teardown."""

    def build(redis: bool = True, **overrides):
        overrides.setdefault("real_packs", ["everyday"])
        return make_provider(SimSettings(**overrides), redis_url if redis else None, metrics_registry)

    # Redis clients are per event loop and each test's `asyncio.run` closes its loop (and its connections).
    return build
