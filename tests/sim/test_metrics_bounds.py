"""Caller-chosen tool names cannot grow Prometheus without bound: past `MAX_TOOL_LABELS` they share `other`."""

import asyncio

from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.metrics import MAX_TOOL_LABELS, ToolLabels
from sim.settings import SimSettings


def _series(registry: CollectorRegistry) -> int:
    return sum(len(m.samples) for m in registry.collect() if m.name.startswith("slca_sim_"))


def _tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}


def test_a_thousand_fresh_tool_names_add_a_bounded_number_of_series():
    registry = CollectorRegistry()
    provider = make_provider(SimSettings(real_packs=[], cache=False), None, registry)

    async def call_each(names):
        for name in names:
            episode = await provider.new_episode([_tool(name)])
            assert (await episode.call(name, {})).ok

    asyncio.run(call_each([f"warm_{i}" for i in range(MAX_TOOL_LABELS)]))
    full = _series(registry)
    asyncio.run(call_each([f"fresh_{i}" for i in range(1000)]))
    after = _series(registry)
    assert after - full <= 40  # one more label value (`other`): its histogram and counters, nothing per name
    assert registry.get_sample_value("slca_sim_calls_total", {"tool": "other", "backend": "schema"}) == 1000
    assert registry.get_sample_value("slca_sim_calls_total", {"tool": "warm_0", "backend": "schema"}) == 1


def test_tool_labels_keep_the_first_names_seen():
    labels = ToolLabels(limit=2)
    assert [labels(n) for n in ("a", "b", "c", "a", "d", "b")] == ["a", "b", "other", "a", "other", "b"]
