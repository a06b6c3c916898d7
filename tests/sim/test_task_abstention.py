"""Abstention tasks of the everyday pack: a no-tool share per split, offers that cannot serve the request,
demonstrations that answer in plain text."""

from __future__ import annotations

from collections import Counter

import pytest
from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.settings import SimSettings
from sim.tasks import demonstration, load_tasks
from sim.tasks.abstention import REMOVED, UNSUPPORTED, abstain_reply, offer_without
from sim.tasks.everyday_abstention import ALWAYS_BANNED, CAN_SERVE, REQUESTS
from sim.tasks.generate import base_intent

ABSTAIN = (REMOVED, UNSUPPORTED)


def _names(task) -> list[str]:
    return [t["function"]["name"] for t in task.tools]


@pytest.mark.parametrize("split", ["train", "test"])
def test_about_a_quarter_of_each_everyday_split_needs_no_tool(split):
    tasks = load_tasks("everyday", split)
    no_tool = [t for t in tasks if not t.ground_truth.tool_needed]
    assert 0.20 <= len(no_tool) / len(tasks) <= 0.27, (len(no_tool), len(tasks))
    kinds = Counter(base_intent(t) for t in no_tool)
    assert kinds["no_tool"] and kinds[REMOVED] and kinds[UNSUPPORTED], kinds
    assert all(not t.ground_truth.calls and t.ground_truth.needs_tool is False for t in no_tool)
    assert all(not t.ground_truth.facts for t in no_tool if base_intent(t) in ABSTAIN)


def test_abstention_splits_are_the_same_for_every_seed_and_flag_a_refusal():
    ids = [t.task_id for t in load_tasks("everyday", "test") if base_intent(t) in ABSTAIN]
    assert ids == [t.task_id for t in load_tasks("everyday", "test", seed=1) if base_intent(t) in ABSTAIN]
    tasks = load_tasks("everyday", "all") + load_tasks("everyday", "novel")
    refusing = {base_intent(t) for t in tasks if t.ground_truth.refusal}
    assert refusing == {*ABSTAIN, "novel_unsupported"}, refusing
    assert all(not t.ground_truth.calls for t in tasks if t.ground_truth.refusal)


def test_removed_tasks_never_offer_a_tool_that_serves_their_source_request():
    tasks = load_tasks("everyday", "all")
    gold_tools: dict[str, set[str]] = {}
    for t in tasks:
        gold_tools.setdefault(t.intent, set()).update(c.name for c in t.ground_truth.calls)
    removed = [t for t in tasks if base_intent(t) == REMOVED]
    sources = {t.intent.split(":", 1)[1] for t in removed}
    assert len(sources) >= 8, sources
    for task in removed:
        source = task.intent.split(":", 1)[1]
        offered = set(_names(task))
        assert gold_tools[source], source
        assert not offered & gold_tools[source], (task.task_id, offered)
        assert not offered & (set(CAN_SERVE[source]) | ALWAYS_BANNED), (task.task_id, offered)
        # the request is the source intent's own wording: with its tools offered, it is a tool task
        assert 1 <= len(offered) <= 3 and len(offered) == len(task.tools)


def test_unsupported_tasks_offer_near_misses_and_nothing_banned():
    by_key = {r.key: r for r in REQUESTS}
    tasks = [t for t in load_tasks("everyday", "all") if base_intent(t) == UNSUPPORTED]
    assert len({t.intent for t in tasks}) >= 15
    sizes = Counter(len(t.tools) for t in tasks)
    assert sizes[1] and sizes[2] and sizes[3] and set(sizes) <= {1, 2, 3}, sizes
    for task in tasks:
        request = by_key[task.intent.split(":", 1)[1]]
        offered = set(_names(task))
        assert not offered & (ALWAYS_BANNED | set(request.cannot_offer)), (task.task_id, offered)
        if request.near:
            assert offered & set(request.near), (task.task_id, offered)


def test_offer_without_never_offers_a_banned_tool_and_puts_near_misses_first():
    import random

    pool = ["a", "b", "c", "d", "e"]
    for seed in range(50):
        picked = offer_without(random.Random(seed), pool, {"a", "b"}, first=["c", "a"])
        assert 1 <= len(picked) <= 3 and "c" in picked and not {"a", "b"} & set(picked)
        assert len(set(picked)) == len(picked)


def test_abstention_demonstrations_reply_in_plain_text_naming_the_offered_tools():
    provider = make_provider(SimSettings(cache=False, real_packs=["everyday"]), None, CollectorRegistry())
    tasks = load_tasks("everyday", "train")
    picked = [next(t for t in tasks if base_intent(t) == kind) for kind in (*ABSTAIN, "no_tool")]
    for task in picked:
        messages = demonstration(task, provider)
        assert [m["role"] for m in messages] == ["user", "assistant"], task.task_id
        assert "<tool_call>" not in messages[-1]["content"] and messages[-1]["content"].strip()
    for task in picked[:2]:
        reply = demonstration(task, provider)[-1]["content"]
        assert reply == abstain_reply(task.messages[0]["content"], _names(task))
        assert all(name in reply for name in _names(task)), reply


def test_abstain_reply_is_fixed_per_query_and_lists_the_tools():
    assert abstain_reply("Wake me up at 06:30.", ["a", "b"]) == abstain_reply("Wake me up at 06:30.", ["a", "b"])
    assert "(a)" in abstain_reply("q", ["a"]) and "(a, b or c)" in abstain_reply("q", ["a", "b", "c"])
