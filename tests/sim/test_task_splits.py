"""The everyday splits: one pool and split for every seed; a same-template `test` split over every intent; a
`novel` split of intents and tools train never offers; no request repeated across splits; abstention flags a
refusal; facts a wrong reply fails, stated by every demonstration; every train demonstration fits the warm
start's length limit."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.real.everyday import everyday_pack
from sim.settings import SimSettings
from sim.tasks import demonstration, load_tasks, read_jsonl
from sim.tasks.abstention import REMOVED, UNSUPPORTED
from sim.tasks.everyday_novel import NOVEL_TOOLS
from sim.tasks.generate import base_intent, generate_pool, gold_signature
from slca.cli import main as slca_main


def _offered(task) -> set[str]:
    return {t["function"]["name"] for t in task.tools}


@pytest.fixture(scope="module")
def splits():
    return {split: load_tasks("everyday", split) for split in ("train", "test", "novel")}


@pytest.fixture(scope="module")
def demos(splits):
    provider = make_provider(SimSettings(cache=False, real_packs=["everyday"]), None, CollectorRegistry())
    return {split: [(t, demonstration(t, provider)) for t in splits[split]] for split in ("train", "novel")}


def test_the_pool_and_split_are_the_same_whatever_the_seed():
    for seed in (1, 7):
        assert [t.model_dump() for t in generate_pool("everyday", seed)] == [
            t.model_dump() for t in generate_pool("everyday", 0)
        ]
        for split in ("train", "test", "novel"):
            assert [t.task_id for t in load_tasks("everyday", split, seed)] == [
                t.task_id for t in load_tasks("everyday", split)
            ]


def test_test_covers_every_intent_and_novel_has_its_own(splits):
    train, test, novel = (Counter(base_intent(t) for t in splits[s]) for s in ("train", "test", "novel"))
    assert len(splits["test"]) >= 100 and len(splits["novel"]) >= 100 and len(splits["train"]) >= 300
    assert set(test) == set(train) and {"no_tool", REMOVED, UNSUPPORTED} <= set(test)
    assert all(test[name] >= 3 for name in train), test
    assert not set(novel) & set(train) and len(novel) >= 10 and min(novel.values()) >= 8, novel
    assert {t.split for t in load_tasks("everyday", "all")} == {"train", "test"}  # "all" is train + test


def test_novel_tools_are_never_offered_outside_the_novel_split(splits):
    assert NOVEL_TOOLS <= set(everyday_pack().tools) | {
        "get_air_quality",
        "get_flight_status",
        "add_todo",
        "lookup_definition",
    }
    for task in splits["train"] + splits["test"]:
        assert not _offered(task) & NOVEL_TOOLS, (task.task_id, _offered(task) & NOVEL_TOOLS)
    novel_calls = [t for t in splits["novel"] if t.ground_truth.calls]
    assert all({c.name for c in t.ground_truth.calls} <= NOVEL_TOOLS for t in novel_calls)
    used = {c.name for t in novel_calls for c in t.ground_truth.calls}
    assert len(used) >= 8, used
    steps = [Counter(c.step for c in t.ground_truth.calls) for t in novel_calls]
    assert any(s[0] >= 2 for s in steps), "some novel task has parallel calls"
    refusing = [t for t in splits["novel"] if t.ground_truth.refusal]
    assert refusing and all(_offered(t) & NOVEL_TOOLS for t in refusing)  # new near misses
    assert any(
        not t.ground_truth.calls and not t.ground_truth.refusal and t.ground_truth.facts for t in splits["novel"]
    )


def test_no_held_out_task_repeats_a_train_request(splits):
    train_queries = {t.messages[0]["content"] for t in splits["train"]}
    train_calls = {gold_signature(t.ground_truth.calls) for t in splits["train"] if t.ground_truth.calls}
    for task in splits["test"] + splits["novel"]:
        assert task.messages[0]["content"] not in train_queries, task.task_id
        assert not task.ground_truth.calls or gold_signature(task.ground_truth.calls) not in train_calls, task.task_id
    # a knowledge question is the same question with any lead-in: each is asked in one split only
    questions = {
        s: {
            t.messages[0]["content"].split(": ")[-1].split("! ")[-1].removeprefix("Hey, ")
            for t in splits[s]
            if base_intent(t) in ("no_tool", "novel_knowledge")
        }
        for s in splits
    }
    assert not questions["train"] & questions["test"] and not questions["train"] & questions["novel"]


def test_abstention_flags_a_refusal_and_other_tasks_have_facts(splits):
    for task in splits["train"] + splits["test"] + splits["novel"]:
        gt = task.ground_truth
        abstains = base_intent(task) in (REMOVED, UNSUPPORTED, "novel_unsupported")
        assert gt.refusal == abstains, task.task_id
        chat = base_intent(task) == "no_tool" and not gt.facts  # "Hi there!": nothing to state
        assert abstains or chat or gt.facts, task.task_id
    weather = [t for t in splits["train"] if base_intent(t) == "weather"]
    assert all(t.ground_truth.facts[0] in t.messages[0]["content"] for t in weather)  # the city asked about
    assert len({t.ground_truth.facts[1] for t in weather}) > 5  # the temperature the tool returned


def _on_word_boundaries(fact: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(fact)}(?!\w)", text, re.IGNORECASE) is not None


@pytest.mark.parametrize("split", ["train", "novel"])
def test_every_demonstration_states_each_of_its_facts(demos, split):
    for task, messages in demos[split]:
        reply = messages[-1]["content"]
        assert messages[-1]["role"] == "assistant" and "<tool_call>" not in reply
        for fact in task.ground_truth.facts:
            assert _on_word_boundaries(fact, reply), (task.task_id, fact, reply)
        tool_msgs = [m for m in messages if m["role"] == "tool"]
        assert len(tool_msgs) == len(task.ground_truth.calls) and all('"error"' not in m["content"] for m in tool_msgs)


def test_every_train_demonstration_fits_the_warm_start_length_limit(demos, tiny_model_dir):
    from transformers import AutoTokenizer

    from learner.settings import LearnerSettings
    from learner.sft_data import encode_conversation, template_messages

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    limit = LearnerSettings().sft_max_tokens
    lengths = [len(encode_conversation(tokenizer, template_messages(t, m), 10**9).input_ids) for t, m in demos["train"]]
    assert max(lengths) <= limit, (max(lengths), limit)
    assert sum(n > 1024 for n in lengths) > 0  # the limit matters: six-tool offers run past 1,024 tokens


def test_novel_is_everyday_only_and_the_cli_writes_it(tmp_path):
    for pack in ("airline", "retail"):
        with pytest.raises(ValueError, match="no novel split"):
            load_tasks(pack, "novel")
    assert [t.task_id for t in load_tasks("all", "novel")] == [t.task_id for t in load_tasks("everyday", "novel")]
    out = tmp_path / "novel.jsonl"
    assert slca_main(["sim", "tasks", "--pack", "everyday", "--split", "novel", "--out", str(out)]) == 0
    assert [t.split for t in read_jsonl(out)] == ["novel"] * len(load_tasks("everyday", "novel"))


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("roman_numeral", {"number": 1987}, {"number": 1987, "roman": "MCMLXXXVII"}),
        ("iso_week", {"date": "2021-01-03"}, {"date": "2021-01-03", "iso_year": 2020, "week": 53}),
        (
            "loan_payment",
            {"principal": 1200, "annual_rate_percent": 0, "years": 1},
            {"monthly_payment": 100.0, "total_paid": 1200.0, "total_interest": 0.0},
        ),
        (
            "compound_interest",
            {"principal": 1000, "rate_percent": 10, "years": 2},
            {"amount": 1210.0, "interest": 210.0, "compounds_per_year": 1},
        ),
        ("text_stats", {"text": "Red fox."}, {"words": 2, "characters": 8, "letters": 6}),
        (
            "number_stats",
            {"numbers": [1, 2, 4], "decimals": 1},
            {"count": 3, "mean": 2.3, "median": 2, "min": 1, "max": 4},
        ),
    ],
)
def test_novel_real_tools_are_exact(name, args, expected):
    import asyncio

    assert asyncio.run(everyday_pack().tools[name].fn(args, None)) == expected
