"""The eval plan (whole splits, every intent; seeded BFCL samples) and the BFCL item path against a fake server
speaking serve's chat response shape: a malformed call block fails the item, a failed request is a failed record."""

import asyncio
import json
from dataclasses import asdict, fields

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

import sim.tasks
from ops.experiments.eval.bfcl import load_category, score
from ops.experiments.eval.suite import (
    EvalItem,
    EvalPlan,
    ItemRecord,
    bfcl_sample,
    plan_items,
    read_jsonl,
    run_items,
    write_jsonl,
)
from slca.chat.hermes import render_tool_calls

SPLITS = [s for s in ("test", "novel") if s in sim.tasks.SPLITS]


@pytest.mark.parametrize("split", SPLITS)
def test_plan_covers_every_task_and_intent_of_the_split(split):
    tasks = sim.tasks.load_tasks("everyday", split)
    items = plan_items(EvalPlan(splits=(split,), bfcl_categories=()))
    assert [i.item_id for i in items] == [t.task_id for t in tasks]
    assert {i.task.intent for i in items} == {t.intent for t in tasks} and len({t.intent for t in tasks}) > 4
    assert all(i.suite == split and i.case is None for i in items)


def test_bfcl_sample_is_seeded_random_and_stable():
    cases = load_category("simple_python")
    first = bfcl_sample(cases, 20, seed=0)
    assert len(first) == 20 and [c.id for c in first] == [c.id for c in bfcl_sample(cases, 20, seed=0)]
    assert [c.id for c in first] != [c.id for c in cases[:20]]  # never the first N
    assert {c.id for c in first} != {c.id for c in bfcl_sample(cases, 20, seed=1)}
    assert len(bfcl_sample(cases, None, 0)) == len(cases) == len(bfcl_sample(cases, 10**6, 0))
    items = plan_items(EvalPlan(splits=(), bfcl_categories=("simple_python", "irrelevance"), bfcl_per_category=5))
    assert [i.suite for i in items] == ["bfcl:simple_python"] * 5 + ["bfcl:irrelevance"] * 5
    assert [i.item_id for i in items[:5]] == [c.id for c in bfcl_sample(cases, 5, 0)]


def test_plan_rejects_what_it_cannot_run():
    with pytest.raises(ValueError, match="mode"):
        EvalPlan(mode="beam")
    with pytest.raises(ValueError, match="concurrency"):
        EvalPlan(concurrency=0)
    with pytest.raises(ValueError, match="split"):
        plan_items(EvalPlan(splits=("nonexistent",), bfcl_categories=()))


def test_sampled_seeds_are_per_item_and_stable():
    a, b = EvalItem("test", "t1"), EvalItem("test", "t2")
    assert a.seed == EvalItem("test", "t1").seed != b.seed and 0 <= a.seed < 2**31


def test_a_malformed_block_fails_an_irrelevance_item():
    case = load_category("irrelevance", limit=1)[0]
    assert score(case, "I cannot help with that.")["valid"]
    verdict = score(case, '<tool_call>\n{"name": "x", "arguments": \n</tool_call>')
    assert not verdict["valid"] and "malformed" in verdict["error"][0]  # the old checker counted it a refusal


def test_a_malformed_block_beside_a_right_call_fails():
    case = load_category("simple_python", limit=1)[0]
    ((name, params),) = case.answer[0].items()
    right = render_tool_calls([{"name": name, "arguments": {k: v[0] for k, v in params.items() if v and v[0] != ""}}])
    assert score(case, right)["valid"]
    assert not score(case, right + "\n<tool_call>\nnot json\n</tool_call>")["valid"]


def test_records_round_trip_through_jsonl(tmp_path):
    r = ItemRecord(
        "bfcl:multiple",
        "multiple_3",
        False,
        None,
        None,
        {"calls": 1.0},
        [{"name": "f", "arguments": {}, "valid": True}],
        "hi ✓",
        2,
        None,
        "wrong value",
    )
    write_jsonl([r, r], tmp_path / "items.jsonl")
    assert read_jsonl(tmp_path / "items.jsonl") == [r, r]


# --- BFCL items against a fake server with serve's chat response shape ---------------------------
def chat_response(text: str, calls: list[dict]) -> dict:
    """What serve/chat.py answers: the parsed valid calls in the message, the sampled tokens in logprobs."""
    message = {"role": "assistant", "content": None if calls else text}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
            }
            for i, c in enumerate(calls)
        ]
    tokens = [{"token": text[i : i + 3], "logprob": -0.1} for i in range(0, len(text), 3)]
    return {
        "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": {"content": tokens}}],
        "policy_version": 7,
    }


def run_against(replies: dict[str, web.Response], items, plan=EvalPlan(concurrency=2)):
    seen = []

    async def chat(request):
        body = await request.json()
        seen.append(body)
        return replies[body["messages"][-1]["content"]]

    async def go():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        async with TestServer(app) as server:
            return await run_items(str(server.make_url("")).rstrip("/"), "k", items, plan)

    return asyncio.run(go()), seen


def test_bfcl_items_through_the_chat_api():
    simple = load_category("simple_python", limit=1)[0]
    irrelevant = load_category("irrelevance", limit=1)[0]
    ((name, params),) = simple.answer[0].items()
    args = {k: v[0] for k, v in params.items() if v and v[0] != ""}
    right = render_tool_calls([{"name": name, "arguments": args}])
    items = [
        EvalItem("bfcl:simple_python", simple.id, case=simple),
        EvalItem("bfcl:irrelevance", irrelevant.id, case=irrelevant),
        EvalItem("bfcl:simple_python", "again", case=simple),
    ]
    # the same question twice: first answered right, then right plus a malformed block the message cannot show
    answers = iter(
        [
            web.json_response(chat_response(right, [{"name": name, "arguments": args}])),
            web.json_response(
                chat_response(right + "<tool_call>{oops</tool_call>", [{"name": name, "arguments": args}])
            ),
        ]
    )

    class Replies(dict):
        def __getitem__(self, key):
            if key == simple.messages[-1]["content"]:
                return next(answers)
            return web.json_response({"error": {"message": "engine unavailable"}}, status=503)

    plan = EvalPlan(concurrency=1)
    records, seen = run_against(Replies(), items, plan)
    assert [r.item_id for r in records] == [simple.id, irrelevant.id, "again"]
    assert records[0].success and records[0].policy_version == 7 and records[0].calls[0]["name"] == name
    assert not records[1].success and records[1].error == "HTTP 503: engine unavailable"  # kept, not dropped
    assert not records[2].success and "malformed" in records[2].detail
    assert records[2].components == {"calls": 1.0, "malformed": 1.0}
    assert all(b["tool_choice"] == "auto" and b["temperature"] == 0.0 and b["logprobs"] for b in seen)
    assert {f.name for f in fields(ItemRecord)} <= set(asdict(records[0]))


def test_slca_eval_url_evaluates_a_running_server_and_sends_its_key(tmp_path):
    """`slca eval --url`: the plan against a server that is already up (no in-process server), records + summary
    written, the bearer key sent."""
    import threading
    from types import SimpleNamespace

    from ops.experiments.eval.main import run_eval
    from slca.config import load_config

    seen_auth = []

    async def chat(request):
        seen_auth.append(request.headers.get("Authorization"))
        return web.json_response(chat_response("No function fits.", []))

    ready = threading.Event()
    box = {}

    def serve():
        loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        server = TestServer(app, loop=loop)
        loop.run_until_complete(server.start_server())
        box["url"], box["loop"], box["server"] = str(server.make_url("")).rstrip("/"), loop, server
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        args = SimpleNamespace(
            eval_command=None,
            model=None,
            url=box["url"],
            api_key="sk-eval",
            splits="",
            pack="everyday",
            bfcl_categories="irrelevance",
            bfcl_per_category=3,
            bfcl_seed=0,
            mode="greedy",
            max_tokens=16,
            max_turns=1,
            concurrency=2,
            out=tmp_path / "run",
        )
        assert run_eval(args, load_config(None, [])) == 0
    finally:
        box["loop"].call_soon_threadsafe(box["loop"].stop)
        thread.join(5)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["items"] == 3 and summary["model"] == "served"
    assert summary["summary"]["bfcl:irrelevance"]["success"] == 1.0  # a plain refusal on every irrelevance item
    assert seen_auth == ["Bearer sk-eval"] * 3
