"""Invalid calls give structured 400-style results naming the field; nothing raises into the agent loop."""

from __future__ import annotations

import asyncio

import pytest

from sim.tasks.catalog import SIMULATED_TOOLS
from tests.support.metrics import metric

NESTED = {
    "type": "function",
    "function": {
        "name": "create_order",
        "description": "Create an order.",
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "required": ["customer", "items"],
            "properties": {
                "customer": {"type": "object", "required": ["email"], "properties": {"email": {"type": "string"}}},
                "items": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["sku", "qty"],
                        "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
                    },
                },
            },
        },
    },
}


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("get_weather", {}, "city"),
        ("get_weather", {"city": 42}, "city"),
        ("get_weather", {"city": "Oslo", "unit": "kelvin"}, "unit"),
        ("book_restaurant", {"restaurant": "Noma", "date": "2026-01-01", "party_size": 0}, "party_size"),
        ("create_order", {"customer": {}, "items": [{"sku": "A", "qty": 1}]}, "customer.email"),
        ("create_order", {"customer": {"email": "a@b.c"}, "items": [{"sku": "A", "qty": 0}]}, "items.0.qty"),
        ("create_order", {"customer": {"email": "a@b.c"}, "items": [], "coupon": "X"}, "coupon"),
    ],
)
def test_invalid_arguments_name_the_field(make_sim, metrics_registry, name, arguments, field):
    provider = make_sim()

    async def run():
        episode = await provider.new_episode(SIMULATED_TOOLS + [NESTED])
        return await episode.call(name, arguments)

    result = asyncio.run(run())
    assert not result.ok and result.status == 400
    assert f"'{field}'" in result.error, result.error
    assert result.for_model() == {"error": {"status": 400, "message": result.error}}
    label = name if name in provider.tool_names() else "other"  # NESTED is a caller's tool: labelled `other`
    assert metric(metrics_registry, "slca_sim_validation_failures_total", tool=label) == 1


def test_bad_inputs_are_results_not_exceptions(make_sim):
    provider = make_sim()
    tools = SIMULATED_TOOLS + [
        {"type": "function", "function": {"name": "calculator", "x-mode": "real"}},
        {"type": "function", "function": {"name": "rm_rf", "x-mode": "real", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "broken", "parameters": {"type": "objekt"}}},
    ]

    async def run():
        episode = await provider.new_episode(tools)
        return {
            "unknown": await episode.call("no_such_tool", {}),
            "not_object": await episode.call("get_weather", ["Paris"]),
            "bad_json": await episode.call("get_weather", "{city: Paris"),
            "json_text": await episode.call("get_weather", '{"city": "Paris"}'),
            "refused_real": await episode.call("rm_rf", {}),
            "bad_definition": await episode.call("broken", {}),
            "real_ok": await episode.call("calculator", {"expression": "6 * 7"}),
        }

    out = asyncio.run(run())
    assert out["unknown"].status == 404 and "no_such_tool" in out["unknown"].error
    assert out["not_object"].status == 400 and "JSON object" in out["not_object"].error
    assert out["bad_json"].status == 400
    assert out["json_text"].ok and out["json_text"].content["city"] == "Paris"
    assert out["refused_real"].status == 403 and "not an allowed real tool" in out["refused_real"].error
    assert out["bad_definition"].status == 400 and "not a valid JSON schema" in out["bad_definition"].error
    assert out["real_ok"].ok and out["real_ok"].content["result"] == 42 and out["real_ok"].meta["mode"] == "real"
