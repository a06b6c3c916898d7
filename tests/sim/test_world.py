"""A world seed (`sim.world`): with one, an id the seed lacks is not found, a seeded id answers its record and a state
change applies to a copy of it; without one, SGLS behaves as before (an unknown well-formed id is answered)."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.settings import SimSettings
from sim.world import WorldSeed
from slca.cli import main as slca_main

ORDER = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "user_id": {"type": "string"},
        "status": {"type": "string", "enum": ["pending", "delivered", "cancelled"]},
        "total": {"type": "number"},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "name": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku", "name", "qty"],
            },
        },
    },
    "required": ["order_id", "user_id", "status", "total", "lines"],
}
TABLES = {
    "orders": {
        "#W1000001": {"order_id": "#W1000001", "user_id": "ann_lee_1", "status": "pending", "total": 12.5, "lines": []},
        "#W1000002": {
            "order_id": "#W1000002",
            "user_id": "ann_lee_1",
            "status": "delivered",
            "total": 3.0,
            "lines": [],
        },
    },
    "users": {
        "ann_lee_1": {
            "user_id": "ann_lee_1",
            "email": "Ann@example.com",
            "payment_methods": {"card_7": {"id": "card_7", "source": "card"}},
        }
    },
    "products": {"kettle": {"sku": "kettle", "name": "Electric Kettle", "price": 40.0}},
}
ID = {"type": "string", "description": "The order id, such as '#W0000000'."}


def _tool(name: str, params: dict, response: dict, description: str = "") -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description or name.replace("_", " "),
            "parameters": {"type": "object", "properties": params, "required": list(params)},
            "x-response-schema": response,
        },
    }


TOOLS = [
    _tool("get_order_details", {"order_id": ID}, ORDER),
    _tool("cancel_pending_order", {"order_id": ID}, ORDER, "Cancel a pending order. The status becomes 'cancelled'."),
    _tool(
        "modify_pending_order_lines",
        {"order_id": ID, "lines": {"type": "array", "items": {"type": "object"}}},
        ORDER,
    ),
    _tool("find_user_id_by_email", {"email": {"type": "string"}}, {"type": "string"}),
]


def _calls(world: WorldSeed | None, calls: list[tuple[str, dict]]) -> list:
    async def run():
        provider = make_provider(SimSettings(cache=False, real_packs=[]), None, CollectorRegistry(), world=world)
        episode = await provider.new_episode(TOOLS, "world")
        try:
            return [await episode.call(name, args) for name, args in calls]
        finally:
            await provider.close()

    return asyncio.run(run())


def test_seed_collects_every_id_mapping_and_refuses_another_version():
    world = WorldSeed.from_tables(TABLES, "test")
    assert set(world.kinds) == {"order_id", "user_id", "payment_method_id", "sku"}
    assert world.kind_of("order_id") == "order_id" and world.kind_of("new_skus") is None
    assert world.kind_of("new_order_ids") == "order_id" and world.kind_of("note") is None
    assert world.find("user_id", {"email": "ann@EXAMPLE.com"}) == ["ann_lee_1"]
    assert WorldSeed.model_validate_json(world.model_dump_json()) == world
    with pytest.raises(ValueError, match="version"):
        WorldSeed.model_validate({**world.model_dump(), "version": 99})


@pytest.mark.parametrize("tool", ["get_order_details", "cancel_pending_order"])
def test_with_a_seed_an_unknown_well_formed_id_is_not_found(tool):
    (result,) = _calls(WorldSeed.from_tables(TABLES), [(tool, {"order_id": "#W9999999"})])
    assert not result.ok and result.status == 404 and "not found" in result.error


@pytest.mark.parametrize("tool", ["get_order_details", "cancel_pending_order"])
def test_without_a_seed_an_unknown_well_formed_id_is_answered_as_today(tool):
    (result,) = _calls(None, [(tool, {"order_id": "#W9999999"})])
    assert result.ok and result.content["order_id"] == "#W9999999"


def test_with_a_seed_a_seeded_id_answers_its_record():
    (result,) = _calls(WorldSeed.from_tables(TABLES), [("get_order_details", {"order_id": "#W1000001"})])
    assert result.ok and result.content == TABLES["orders"]["#W1000001"]
    (unseeded,) = _calls(None, [("get_order_details", {"order_id": "#W1000001"})])
    assert unseeded.ok and unseeded.content != TABLES["orders"]["#W1000001"]  # without one: synthesised


def test_with_a_seed_a_state_change_applies_to_a_copy_of_the_seeded_record():
    world = WorldSeed.from_tables(copy.deepcopy(TABLES))
    cancel, read, again = _calls(
        world,
        [
            ("cancel_pending_order", {"order_id": "#W1000001"}),
            ("get_order_details", {"order_id": "#W1000001"}),
            ("cancel_pending_order", {"order_id": "#W1000002"}),
        ],
    )
    assert cancel.ok and cancel.content == {**TABLES["orders"]["#W1000001"], "status": "cancelled"}
    assert read.ok and read.content == cancel.content
    assert not again.ok and again.status == 409  # the seed says it is delivered, not pending
    assert world.kinds["order_id"]["#W1000001"]["status"] == "pending"  # the seed itself is never written


def test_with_a_seed_a_listed_object_named_by_a_seeded_id_takes_its_record_fields():
    (result,) = _calls(
        WorldSeed.from_tables(TABLES),
        [("modify_pending_order_lines", {"order_id": "#W1000001", "lines": [{"sku": "kettle", "qty": 2}]})],
    )
    assert result.ok and result.content["lines"][0] == {"sku": "kettle", "name": "Electric Kettle", "qty": 2}


def test_with_a_seed_a_lookup_by_fields_answers_the_seeded_id_or_not_found():
    world = WorldSeed.from_tables(TABLES)
    found, missing = _calls(
        world,
        [("find_user_id_by_email", {"email": "ann@example.com"}), ("find_user_id_by_email", {"email": "x@y.z"})],
    )
    assert found.ok and found.content == "ann_lee_1"
    assert not missing.ok and missing.status == 404
    (unseeded,) = _calls(None, [("find_user_id_by_email", {"email": "x@y.z"})])
    assert unseeded.ok


def test_tau2_seed_answers_what_the_real_tool_answers():
    """The seed of a τ² domain is its own database: a seeded read states what the real tool states."""
    from sim.fidelity.replay import simulated
    from sim.real.tau2 import tau2_pack, world_seed

    async def run():
        settings = SimSettings(cache=False, real_packs=["retail"])
        provider = make_provider(settings, None, CollectorRegistry(), world=world_seed("retail"))
        definitions = [t.definition("real") for t in tau2_pack("retail").tools.values()]
        real = await provider.new_episode(definitions, "real")
        sim = await provider.new_episode([simulated(d) for d in definitions], "sim")
        try:
            args = {"order_id": "#W2611340"}
            return await real.call("get_order_details", args), await sim.call("get_order_details", args)
        finally:
            await real.close()
            await sim.close()
            await provider.close()

    real, sim = asyncio.run(run())
    assert real.ok and sim.ok and sim.content == real.content


def test_fidelity_command_measures_with_and_without_the_seed(tmp_path):
    argv = ["sim", "fidelity", "--backend", "schema", "--domain", "retail,everyday", "--limit", "1"]
    assert slca_main([*argv, "--world-seed", "both", "--name", "w", "--out", str(tmp_path)]) == 0
    folder = tmp_path / "w"
    names = {p.name for p in folder.glob("summary-*.json")}
    assert names == {"summary-schema-retail.json", "summary-schema-seeded-retail.json", "summary-schema-everyday.json"}
    seeded = json.loads((folder / "summary-schema-seeded-retail.json").read_text())
    assert seeded["world_seed"] == "tau2:retail" and "--world-seed on" in seeded["command"]
    assert json.loads((folder / "summary-schema-retail.json").read_text())["world_seed"] is None
    table = (folder / "table.md").read_text()
    assert "no world seed" in table and "seeded with the domain's database (`tau2:retail`)" in table


def test_setting_names_a_domain_or_a_file_and_a_provider_loads_it(tmp_path):
    """`sim.world_seed`: none, a τ² domain or a seed file; make_provider loads it when it is given no seed."""
    assert SimSettings(world_seed="none").world_seed is None and SimSettings().world_seed is None
    assert SimSettings(world_seed="retail").world_seed == "retail"
    path = tmp_path / "seed.json"
    path.write_text(WorldSeed.from_tables(TABLES, "test").model_dump_json())
    provider = make_provider(SimSettings(cache=False, real_packs=[], world_seed=str(path)), None, CollectorRegistry())
    assert provider.world == WorldSeed.from_tables(TABLES, "test")
    asyncio.run(provider.close())


@pytest.mark.parametrize(
    ("value", "why"),
    [("nowhere/seed.json", "neither a τ² domain"), ("bad.json", "is not a world seed")],
)
def test_a_wrong_setting_stops_the_start_with_a_clear_error(tmp_path, monkeypatch, value, why):
    from slca.config import ConfigError, load_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps({"kinds": {"user_id": []}}))
    config = load_config(None, [f"sim.world_seed={value}"])
    with pytest.raises(ConfigError, match=f"sim.world_seed.*{why}"):
        config.section("sim")


def test_an_id_the_episode_stated_as_another_kind_is_not_found():
    """Retail: an item id an order stated is no product id (the real tool: 'Product not found'); the order's own
    product ids and ids of the kind the episode stated stay accepted."""
    from sim.fidelity.replay import simulated
    from sim.real.tau2 import tau2_pack, world_seed

    async def run():
        provider = make_provider(
            SimSettings(cache=False, real_packs=[]), None, CollectorRegistry(), world=world_seed("retail")
        )
        definitions = [simulated(t.definition("real")) for t in tau2_pack("retail").tools.values()]
        sim = await provider.new_episode(definitions, "kinds")
        try:
            order = await sim.call("get_order_details", {"order_id": "#W2611340"})
            item = order.content["items"][0]
            as_product = await sim.call("get_product_details", {"product_id": item["item_id"]})
            product = await sim.call("get_product_details", {"product_id": item["product_id"]})
            return as_product, product
        finally:
            await sim.close()
            await provider.close()

    as_product, product = asyncio.run(run())
    assert not as_product.ok and as_product.status == 404
    assert product.ok


def test_a_search_by_fields_answers_the_seeded_records_that_match():
    """Airline: a direct-flight search answers the seeded flights of that route and date that the answer's schema can
    state (available ones), as the real tool does; a route the seed lacks finds nothing."""
    from sim.fidelity.replay import simulated
    from sim.real.tau2 import tau2_pack, world_seed

    async def run():
        settings = SimSettings(cache=False, real_packs=["airline"])
        provider = make_provider(settings, None, CollectorRegistry(), world=world_seed("airline"))
        definitions = [t.definition("real") for t in tau2_pack("airline").tools.values()]
        real = await provider.new_episode(definitions, "real")
        sim = await provider.new_episode([simulated(d) for d in definitions], "sim")
        try:
            out = []
            for route in (("ORD", "PHL"), ("ORD", "XXX")):
                args = {"origin": route[0], "destination": route[1], "date": "2024-05-26"}
                out.append(
                    (await real.call("search_direct_flight", args), await sim.call("search_direct_flight", args))
                )
            return out
        finally:
            await real.close()
            await sim.close()
            await provider.close()

    (real, sim), (real_none, sim_none) = asyncio.run(run())
    assert real.ok and sim.ok and len(real.content) > 1 and sim.content == real.content
    assert sim.meta["source"] == "world" and real_none.content == sim_none.content == []


def test_a_new_part_takes_its_seeded_record():
    """Retail: a pending order's item modified into another variant carries that variant's price and options, as the
    real tool writes them; the items the call left alone keep theirs."""
    from sim.fidelity.replay import simulated
    from sim.real.tau2 import tau2_pack, world_seed

    args = {
        "order_id": "#W4776164",
        "item_ids": ["8349118980"],
        "new_item_ids": ["9647292434"],
        "payment_method_id": "credit_card_9513926",
    }

    async def run():
        settings = SimSettings(cache=False, real_packs=["retail"])
        provider = make_provider(settings, None, CollectorRegistry(), world=world_seed("retail"))
        definitions = [t.definition("real") for t in tau2_pack("retail").tools.values()]
        real = await provider.new_episode(definitions, "real")
        sim = await provider.new_episode([simulated(d) for d in definitions], "sim")
        try:
            return await real.call("modify_pending_order_items", args), await sim.call(
                "modify_pending_order_items", args
            )
        finally:
            await real.close()
            await sim.close()
            await provider.close()

    real, sim = asyncio.run(run())
    assert real.ok and sim.ok
    assert [(i["item_id"], i["price"], i["options"]) for i in sim.content["items"]] == [
        (i["item_id"], i["price"], i["options"]) for i in real.content["items"]
    ]
