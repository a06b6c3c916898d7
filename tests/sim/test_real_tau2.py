"""τ² airline and retail tools run for real, on a fresh database per episode."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.real.tau2 import db_json
from sim.settings import SimSettings


@pytest.fixture(scope="module")
def provider():
    return make_provider(SimSettings(cache=False, real_packs=["airline", "retail"]), None, CollectorRegistry())


def _tools(provider, pack):
    return [t.definition("real") for t in provider.registry.tools(pack)]


def test_reservation_from_the_database_is_returned(provider):
    rid, expected = next(iter(db_json("airline")["reservations"].items()))

    async def run():
        episode = await provider.new_episode(_tools(provider, "airline"))
        return await episode.call("get_reservation_details", {"reservation_id": rid}), await episode.call(
            "get_reservation_details", {"reservation_id": "NOSUCH"}
        )

    found, missing = asyncio.run(run())
    assert found.ok and found.meta["mode"] == "real"
    assert found.content["reservation_id"] == rid
    assert found.content["user_id"] == expected["user_id"] and found.content["flights"] == expected["flights"]
    assert missing.status == 404 and "not found" in missing.error.lower()


def test_write_is_visible_in_the_same_episode_and_absent_from_a_new_one(provider):
    rid = next(r for r, v in db_json("airline")["reservations"].items() if v.get("status") != "cancelled")

    async def run():
        tools = _tools(provider, "airline")
        episode = await provider.new_episode(tools)
        cancelled = await episode.call("cancel_reservation", {"reservation_id": rid})
        same = await episode.call("get_reservation_details", {"reservation_id": rid})
        other = await (await provider.new_episode(tools)).call("get_reservation_details", {"reservation_id": rid})
        return cancelled, same, other

    cancelled, same, other = asyncio.run(run())
    assert cancelled.ok, cancelled.error
    assert same.content["status"] == "cancelled"
    assert other.content.get("status") != "cancelled"


def test_retail_write_then_read_and_domain_errors(provider):
    uid = next(iter(db_json("retail")["users"]))
    address = {
        "address1": "1 Test Way",
        "address2": "",
        "city": "Testville",
        "state": "TX",
        "country": "USA",
        "zip": "73301",
    }

    async def run():
        tools = _tools(provider, "retail")
        episode = await provider.new_episode(tools)
        changed = await episode.call("modify_user_address", {"user_id": uid, **address})
        read = await episode.call("get_user_details", {"user_id": uid})
        fresh = await (await provider.new_episode(tools)).call("get_user_details", {"user_id": uid})
        bad = await episode.call("get_order_details", {"order_id": 123})
        return changed, read, fresh, bad

    changed, read, fresh, bad = asyncio.run(run())
    assert changed.ok, changed.error
    assert read.content["address"]["city"] == "Testville"
    assert fresh.content["address"]["city"] != "Testville"
    assert bad.status == 400 and "'order_id'" in bad.error


def test_shared_names_need_the_pack(provider):
    """`get_user_details` exists in both domains: a definition without x-pack is refused as ambiguous."""
    tool = {
        "type": "function",
        "function": {"name": "get_user_details", "x-mode": "real", "parameters": {"type": "object"}},
    }

    async def run():
        return await (await provider.new_episode([tool])).call("get_user_details", {"user_id": "x"})

    result = asyncio.run(run())
    assert result.status == 403 and "ambiguous" in result.error
