"""The schema backend: outputs validate against response schemas (property test), same call → same answer,
episode state keeps created ids and writes consistent, and the Redis cache is keyed by state."""

from __future__ import annotations

import asyncio

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.real import PACKS
from sim.schemas import is_valid, tool_spec, validation_error
from sim.settings import SimSettings
from sim.synth import synthesise
from sim.tasks.catalog import SIMULATED_TOOLS
from tests.support.metrics import metric


def _all_tools() -> list[dict]:
    tools = list(SIMULATED_TOOLS)
    for pack in ("everyday", "airline", "retail"):
        tools += [t.definition("simulated") for t in PACKS[pack](10.0).tools.values()]
    return tools


ALL_TOOLS = _all_tools()
PROVIDER = make_provider(SimSettings(cache=False, real_packs=[]), None, CollectorRegistry())


@pytest.mark.parametrize(
    "tool", ALL_TOOLS, ids=[f"{t['function'].get('x-pack', 'catalog')}.{t['function']['name']}" for t in ALL_TOOLS]
)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**40))
def test_schema_output_validates_against_response_schema(tool, seed):
    spec = tool_spec(tool)
    assert spec.response_schema is not None, "every shipped tool declares its response schema"
    arguments = synthesise(spec.parameters, seed)
    assert validation_error(spec.parameters, arguments) is None

    async def run():
        episode = await PROVIDER.new_episode([tool])
        return await episode.call(spec.name, arguments)

    result = asyncio.run(run())
    if not result.ok:  # arguments valid by the schema can still break a rule the tool's text states (sim.rules)
        assert result.status in (400, 404, 409) and "invalid argument" in result.error or "not found" in result.error
        return
    assert is_valid(spec.response_schema, result.content), validation_error(spec.response_schema, result.content)


def test_tool_without_response_schema_gets_a_generic_object():
    tool = {
        "type": "function",
        "function": {"name": "ping_host", "parameters": {"type": "object", "properties": {"host": {"type": "string"}}}},
    }

    async def run():
        return await (await PROVIDER.new_episode([tool])).call("ping_host", {"host": "db1"})

    result = asyncio.run(run())
    assert result.ok and isinstance(result.content, dict) and result.content["host"] == "db1"


def test_same_call_same_answer_within_and_across_episodes_and_providers():
    other = make_provider(SimSettings(cache=False, real_packs=[]), None, CollectorRegistry())

    async def run():
        first = await PROVIDER.new_episode(SIMULATED_TOOLS)
        a = await first.call("get_stock_price", {"symbol": "NVDA"})
        b = await first.call("get_stock_price", {"symbol": "NVDA"})
        c = await (await other.new_episode(SIMULATED_TOOLS)).call("get_stock_price", {"symbol": "NVDA"})
        d = await first.call("get_stock_price", {"symbol": "AMD"})
        return a, b, c, d

    a, b, c, d = asyncio.run(run())
    assert a.content == b.content == c.content
    assert a.content["symbol"] == "NVDA" and d.content["symbol"] == "AMD"
    assert d.content != a.content


NOTES = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": props, "required": req},
            "x-response-schema": NOTE,
        },
    }
    for NOTE in [
        {
            "type": "object",
            "required": ["note_id", "title", "body", "status"],
            "properties": {
                "note_id": {"type": "string"},
                "title": {"type": "string"},
                "body": {"type": "string"},
                "status": {"type": "string", "enum": ["active", "archived", "cancelled"]},
            },
        }
    ]
    for name, props, req in [
        ("create_note", {"title": {"type": "string"}, "body": {"type": "string"}}, ["title", "body"]),
        ("get_note", {"note_id": {"type": "string"}}, ["note_id"]),
        ("update_note", {"note_id": {"type": "string"}, "body": {"type": "string"}}, ["note_id", "body"]),
        ("cancel_note", {"note_id": {"type": "string"}}, ["note_id"]),
        ("delete_note", {"note_id": {"type": "string"}}, ["note_id"]),
    ]
]


def test_created_id_is_fetched_consistently_and_writes_are_visible():
    async def run():
        episode = await PROVIDER.new_episode(NOTES)
        created = await episode.call("create_note", {"title": "Groceries", "body": "eggs, milk"})
        note_id = created.content["note_id"]
        fetched = await episode.call("get_note", {"note_id": note_id})
        await episode.call("update_note", {"note_id": note_id, "body": "eggs, milk, bread"})
        after_update = await episode.call("get_note", {"note_id": note_id})
        await episode.call("cancel_note", {"note_id": note_id})
        after_cancel = await episode.call("get_note", {"note_id": note_id})
        await episode.call("delete_note", {"note_id": note_id})
        after_delete = await episode.call("get_note", {"note_id": note_id})
        fresh = await (await PROVIDER.new_episode(NOTES)).call("get_note", {"note_id": note_id})
        return note_id, created, fetched, after_update, after_cancel, after_delete, fresh

    note_id, created, fetched, updated, cancelled, deleted, fresh = asyncio.run(run())
    assert created.content["title"] == "Groceries" and created.content["body"] == "eggs, milk"
    assert fetched.content == created.content
    assert updated.content["body"] == "eggs, milk, bread" and updated.content["title"] == "Groceries"
    assert cancelled.content["status"] == "cancelled"
    assert deleted.status == 404 and note_id in deleted.error
    assert fresh.ok and fresh.content["title"] != "Groceries"  # another episode never saw the write


def test_redis_cache_is_shared_and_keyed_by_episode_state(make_sim, metrics_registry, redis_url):
    provider_a, provider_b = make_sim(), make_sim()

    async def run():
        a = await (await provider_a.new_episode(NOTES)).call("get_note", {"note_id": "n1"})
        episode = await provider_b.new_episode(NOTES)
        b = await episode.call("get_note", {"note_id": "n1"})
        await episode.call("update_note", {"note_id": "n1", "body": "changed"})
        c = await episode.call("get_note", {"note_id": "n1"})
        await provider_a.close()
        await provider_b.close()
        return a, b, c

    a, b, c = asyncio.run(run())
    assert b.meta["source"] == "cache" and b.content == a.content
    assert c.meta["source"] == "schema" and c.content["body"] == "changed"
    # NOTES is a caller's tool set, not a registered one: its calls are labelled `other` (sim/metrics.py)
    assert metric(metrics_registry, "slca_sim_cache_hits_total", tool="other") == 1
    assert metric(metrics_registry, "slca_sim_calls_total", tool="other", backend="schema") == 4  # 3 get + 1 update
    keys = redis.Redis.from_url(redis_url).keys("slca:sim:cache:schema:get_note:*")
    assert len(keys) == 2  # before and after the write: two episode states


NAMES = st.sampled_from(["price", "temperature", "count", "age", "rating", "latitude", "value", "year"])
BOUND = st.one_of(st.none(), st.integers(-500, 500))


@settings(max_examples=150, deadline=None)
@given(
    name=NAMES,
    kind=st.sampled_from(["number", "integer"]),
    low=BOUND,
    high=BOUND,
    exclusive=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_numbers_respect_schema_bounds_whatever_the_field_name(name, kind, low, high, exclusive, seed):
    if low is not None and high is not None and high - low < 3:
        high = low + 3
    schema: dict = {"type": kind}
    if low is not None:
        schema["exclusiveMinimum" if exclusive else "minimum"] = low
    if high is not None:
        schema["exclusiveMaximum" if exclusive else "maximum"] = high
    wrapper = {"type": "object", "properties": {name: schema}, "required": [name]}
    value = synthesise(wrapper, seed)
    assert is_valid(wrapper, value), (wrapper, value)
