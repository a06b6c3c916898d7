"""Caller-chosen tool names cannot grow Prometheus without bound, nor take the labels of the registered tools: only
the tools the simulator knows (the catalog's simulated tools, the real packs') keep their name; any other is
`other`."""

import asyncio

from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.metrics import ToolLabels
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

    asyncio.run(call_each(["fresh_0"]))
    first = _series(registry)
    asyncio.run(call_each([f"fresh_{i}" for i in range(1, 1000)]))
    assert _series(registry) == first  # every fresh name shares `other`: nothing per name
    assert registry.get_sample_value("slca_sim_calls_total", {"tool": "other", "backend": "schema"}) == 1000


def test_the_first_caller_after_a_start_cannot_take_the_registered_tools_labels():
    from sim.tasks.catalog import SIMULATED_TOOLS

    registry = CollectorRegistry()
    provider = make_provider(SimSettings(real_packs=[], cache=False), None, registry)
    weather = next(t for t in SIMULATED_TOOLS if t["function"]["name"] == "get_weather")

    async def calls():
        for i in range(200):  # one caller's fresh names first, as many as it likes
            episode = await provider.new_episode([_tool(f"mine_{i}")])
            await episode.call(f"mine_{i}", {})
        episode = await provider.new_episode([weather])
        assert (await episode.call("get_weather", {"city": "Paris"})).ok

    asyncio.run(calls())
    assert registry.get_sample_value("slca_sim_calls_total", {"tool": "get_weather", "backend": "schema"}) == 1
    assert registry.get_sample_value("slca_sim_calls_total", {"tool": "mine_0", "backend": "schema"}) is None


def test_tool_labels_keep_only_the_names_they_know():
    labels = ToolLabels({"a"})
    labels.know({"b"})
    assert [labels(n) for n in ("a", "b", "c", "a", "d", "b")] == ["a", "b", "other", "a", "other", "b"]
