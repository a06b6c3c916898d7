"""Task packs: fixed splits, gold calls valid against the offered schemas, demonstrations, JSON lines."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.schemas import tool_spec, validation_error
from sim.settings import SimSettings
from sim.tasks import demonstration, load_tasks, read_jsonl
from slca.chat.hermes import parse_tool_calls
from slca.cli import main as slca_main

PACKS = ["everyday", "airline", "retail"]


@pytest.mark.parametrize("pack", PACKS)
def test_splits_are_fixed_disjoint_and_gold_calls_validate(pack):
    train, test = load_tasks(pack, "train"), load_tasks(pack, "test")
    assert len(train) > 100 and len(test) > 20
    assert not {t.task_id for t in train} & {t.task_id for t in test}
    assert [t.task_id for t in load_tasks(pack, "test")] == [t.task_id for t in test]
    # one pool and split for every run: a training seed never moves a test task into training
    assert [t.task_id for t in load_tasks(pack, "test", seed=1)] == [t.task_id for t in test]
    assert [t.task_id for t in load_tasks(pack, "train", seed=1)] == [t.task_id for t in train]
    novel = load_tasks(pack, "novel") if pack == "everyday" else []
    for task in train + test + novel:
        specs = {s.name: s for s in map(tool_spec, task.tools)}
        # abstention tasks offer 1-3 tools that cannot serve the request (sim.tasks.abstention)
        low, high = (1, 3) if task.ground_truth.refusal else (3, 6)
        assert low <= len(specs) <= high and len(specs) == len(task.tools), task.task_id
        for call in task.ground_truth.calls:
            assert call.name in specs, (task.task_id, call.name)
            assert validation_error(specs[call.name].parameters, call.arguments) is None, task.task_id
        assert task.ground_truth.tool_needed == bool(task.ground_truth.calls)


@pytest.mark.parametrize("pack", PACKS)
def test_intents_have_phrasings_parallel_sequence_and_no_tool_tasks(pack):
    tasks = load_tasks(pack, "all")
    assert {t.split for t in tasks} == {"train", "test"}
    by_intent = Counter(t.intent for t in tasks)
    assert len(by_intent) >= 6 and "no_tool" in by_intent
    no_tool = [t for t in tasks if t.intent == "no_tool"]
    assert all(not t.ground_truth.calls and t.ground_truth.needs_tool is False for t in no_tool)
    steps = [Counter(c.step for c in t.ground_truth.calls) for t in tasks]
    assert any(s.get(0, 0) >= 2 for s in steps), "some task has parallel calls"
    assert any(len(s) >= 2 for s in steps), "some task has sequential steps"
    for intent in by_intent:
        if not intent.startswith("no_tool"):  # no-tool requests are free text (abstention ones per source request)
            firsts = {t.messages[0]["content"].split()[0] for t in tasks if t.intent == intent}
            assert len(firsts) >= 2, f"{intent}: several phrasings"
    real_tool_tasks = [
        t
        for t in tasks
        if t.ground_truth.calls
        and all(
            tool_spec(x).mode == "real" for x in t.tools if tool_spec(x).name in {c.name for c in t.ground_truth.calls}
        )
    ]
    assert real_tool_tasks and all(t.ground_truth.facts for t in real_tool_tasks)


def test_all_pack_is_the_union():
    assert len(load_tasks("all", "test")) == sum(len(load_tasks(p, "test")) for p in PACKS)
    with pytest.raises(ValueError, match="unknown task pack"):
        load_tasks("nope", "train")


def test_demonstrations_execute_gold_calls_and_state_the_facts():
    provider = make_provider(SimSettings(cache=False, real_packs=PACKS), None, CollectorRegistry())
    tasks = load_tasks("all", "test")
    picked = {}
    for task in tasks:
        picked.setdefault(task.intent + task.domain, task)
    for task in picked.values():
        messages = demonstration(task, provider)
        assert messages[0] == task.messages[0]
        assert messages[-1]["role"] == "assistant" and "<tool_call>" not in messages[-1]["content"]
        for fact in task.ground_truth.facts:
            assert fact in messages[-1]["content"], (task.task_id, fact, messages[-1]["content"])
        turns = [m for m in messages[1:-1] if m["role"] == "assistant"]
        calls = [c for turn in turns for c in parse_tool_calls(turn["content"])]
        assert [(c.name, c.arguments) for c in calls] == [(g.name, g.arguments) for g in task.ground_truth.calls]
        assert len(turns) == len({g.step for g in task.ground_truth.calls})
        tool_msgs = [m for m in messages if m["role"] == "tool"]
        assert len(tool_msgs) == len(calls)
        assert all("error" not in json.loads(m["content"]) for m in tool_msgs if m["content"].startswith("{"))


def test_cli_writes_json_lines(tmp_path, capsys):
    out = tmp_path / "tasks.jsonl"
    assert slca_main(["sim", "tasks", "--pack", "retail", "--split", "test", "--out", str(out)]) == 0
    assert [t.task_id for t in read_jsonl(out)] == [t.task_id for t in load_tasks("retail", "test")]
    assert slca_main(["sim", "tasks", "--pack", "bogus"]) == 2
    assert "unknown task pack" in capsys.readouterr().err
