"""Each fault kind appears at its configured rate (within binomial tolerance) and has the right shape."""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter

import pytest

from sim.faults import FAULT_KINDS, FaultPlan
from sim.schemas import is_valid
from sim.tasks.catalog import SIMULATED_TOOLS, simulated_by_name
from tests.support.metrics import metric

N = 1000


def _tolerance(rate: float, n: int = N) -> float:
    return 4.5 * math.sqrt(n * rate * (1 - rate)) + 1


def _run(provider, tool: str, arguments: dict, n: int = N):
    async def run():
        episode = await provider.new_episode(SIMULATED_TOOLS)
        return [await episode.call(tool, arguments) for _ in range(n)]

    return asyncio.run(run())


def test_each_kind_at_its_configured_rate(make_sim, metrics_registry):
    rates = {"rate_limit": 0.10, "timeout": 0.05, "server_error": 0.08, "malformed": 0.12, "missing_fields": 0.10}
    provider = make_sim(redis=False, fault_rates=rates, fault_seed=11)
    results = _run(provider, "get_weather", {"city": "Oslo"})
    counts = Counter(r.fault for r in results)
    for kind, rate in rates.items():
        assert abs(counts[kind] - rate * N) <= _tolerance(rate), (kind, counts[kind])
        assert metric(metrics_registry, "slca_sim_faults_total", tool="get_weather", kind=kind) == counts[kind]
    clean = 1 - sum(rates.values())
    assert abs(counts[None] - clean * N) <= _tolerance(clean)


def test_fault_shapes(make_sim):
    provider = make_sim(redis=False, fault_rates={k: 0.2 for k in FAULT_KINDS}, fault_seed=3)
    schema = simulated_by_name()["get_weather"]["function"]["x-response-schema"]
    by_kind = {}
    for r in _run(provider, "get_weather", {"city": "Oslo"}, 200):
        by_kind.setdefault(r.fault, r)
    assert set(by_kind) == set(FAULT_KINDS)
    assert by_kind["rate_limit"].status == 429 and not by_kind["rate_limit"].ok
    assert by_kind["timeout"].status == 504 and not by_kind["timeout"].ok
    assert by_kind["server_error"].status >= 500 and not by_kind["server_error"].ok
    malformed = by_kind["malformed"].content
    assert isinstance(malformed, str)
    with pytest.raises(json.JSONDecodeError):
        json.loads(malformed)
    missing = by_kind["missing_fields"].content
    assert isinstance(missing, dict) and not is_valid(schema, missing)


def test_global_rate_is_spread_over_kinds_and_per_tool_rates_override(make_sim):
    provider = make_sim(
        redis=False, fault_rate=0.25, tool_fault_rates={"get_stock_price": {"rate_limit": 0.5}}, fault_seed=5
    )
    weather = Counter(r.fault for r in _run(provider, "get_weather", {"city": "Oslo"}))
    for kind in FAULT_KINDS:
        assert abs(weather[kind] - 0.05 * N) <= _tolerance(0.05), (kind, weather[kind])
    stock = Counter(r.fault for r in _run(provider, "get_stock_price", {"symbol": "X"}))
    assert set(stock) == {None, "rate_limit"}
    assert abs(stock["rate_limit"] - 0.5 * N) <= _tolerance(0.5)


def test_invalid_arguments_are_checked_before_any_fault(make_sim):
    provider = make_sim(redis=False, fault_rates={"server_error": 1.0}, fault_seed=1)
    results = _run(provider, "get_weather", {"town": "Oslo"}, 20)
    assert all(r.status == 400 and r.fault is None for r in results)


def test_unknown_fault_kind_is_refused():
    with pytest.raises(ValueError, match="unknown fault kind"):
        FaultPlan({"gremlins": 0.1}, {}, seed=0)
