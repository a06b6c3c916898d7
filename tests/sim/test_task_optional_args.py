"""Optional arguments with schema defaults: declared by the everyday tools, named in some requests and left
out of others. A call that omits an optional argument and one that passes its default are the same call for
exactness (`success`, ToolPO's action, RLTR's completeness); HierR's key Jaccard compares the arguments as written."""

from __future__ import annotations

import asyncio

import pytest

from sim.real.everyday import everyday_pack
from sim.tasks import load_tasks
from sim.tasks.catalog import simulated_by_name
from slca.chat.hermes import parse_tool_calls, render_tool_calls
from slca.contracts import GoldCall, GroundTruth
from workers.scoring.execution import exec_gold
from workers.scoring.extract import Observed, TurnCalls
from workers.scoring.match import match_calls, schema_defaults
from workers.settings import WorkerSettings

OPTIONAL = {
    "get_weather": ("unit", "celsius"),
    "create_calendar_event": ("duration_minutes", 60),
    "search_web": ("max_results", 5),
    "convert_units": ("precision", 6),
    "split_bill": ("tip_percent", 0),
}


def _schemas(task) -> dict[str, dict]:
    return {t["function"]["name"]: t["function"]["parameters"] for t in task.tools}


def _all_parameters() -> dict[str, dict]:
    params = {name: t.parameters for name, t in everyday_pack().tools.items()}
    params.update({name: t["function"]["parameters"] for name, t in simulated_by_name().items()})
    return params


@pytest.mark.parametrize(("tool", "arg", "default"), [(t, a, d) for t, (a, d) in OPTIONAL.items()])
def test_optional_parameters_declare_a_default_and_are_not_required(tool, arg, default):
    params = _all_parameters()[tool]
    assert schema_defaults(params)[arg] == default
    assert arg not in params.get("required", [])


def test_the_real_tools_apply_the_declared_default_when_it_is_omitted():
    tools = everyday_pack().tools

    async def both(name, args, arg, default):
        return (await tools[name].fn(dict(args), None), await tools[name].fn({**args, arg: default}, None))

    omitted, passed = asyncio.run(
        both("convert_units", {"value": 1, "from_unit": "mi", "to_unit": "km"}, "precision", 6)
    )
    assert omitted == passed
    omitted, passed = asyncio.run(both("split_bill", {"amount": 90, "people": 3}, "tip_percent", 0))
    assert omitted == passed and omitted["per_person"] == 30


@pytest.mark.parametrize(
    ("intent", "tool", "arg"),
    [
        ("weather", "get_weather", "unit"),
        ("create_event", "create_calendar_event", "duration_minutes"),
        ("convert", "convert_units", "precision"),
        ("split_bill_even", "split_bill", "tip_percent"),
        ("split_bill_tip_only", "split_bill", "people"),
    ],
)
def test_gold_calls_pass_an_optional_argument_only_when_the_request_names_it(intent, tool, arg):
    tasks = [t for t in load_tasks("everyday", "all") if t.intent == intent]
    calls = [c for t in tasks for c in t.ground_truth.calls if c.name == tool]
    with_arg = [c for c in calls if arg in c.arguments]
    if intent.startswith("split_bill_"):
        assert not with_arg  # the request never mentions it
        return
    assert 0 < len(with_arg) < len(calls), (len(with_arg), len(calls))
    default = schema_defaults(_schemas(tasks[0])[tool])[arg]
    assert any(c.arguments[arg] != default for c in with_arg)


def _observed(task, calls: list[dict]) -> Observed:
    schemas = _schemas(task)
    parsed = parse_tool_calls(render_tool_calls(calls), set(schemas))
    return Observed(set(schemas), schemas, [TurnCalls(0, parsed)], "Done.")


def _task_with_omitted(intent: str, arg: str):
    return next(
        t
        for t in load_tasks("everyday", "train")
        if t.intent == intent and arg not in t.ground_truth.calls[0].arguments
    )


@pytest.mark.parametrize(
    ("intent", "arg"),
    [
        ("weather", "unit"),
        ("create_event", "duration_minutes"),
        ("convert", "precision"),
        ("split_bill_even", "tip_percent"),
    ],
)
def test_a_gold_call_omitting_an_optional_argument_matches_a_call_passing_its_default(intent, arg):
    task = _task_with_omitted(intent, arg)
    gold = task.ground_truth.calls[0]
    default = schema_defaults(_schemas(task)[gold.name])[arg]
    for args in (gold.arguments, {**gold.arguments, arg: default}):
        ex = exec_gold(_observed(task, [{"name": gold.name, "arguments": args}]), task.ground_truth, WorkerSettings())
        assert ex.components["value"] == 1.0 and ex.matches[0].exact, args
        assert ex.components["key"] == (1.0 if args is gold.arguments else (len(args) - 1) / len(args))


def test_a_non_default_value_still_counts_against_the_call():
    task = _task_with_omitted("weather", "unit")
    gold = task.ground_truth.calls[0]
    wrong = {**gold.arguments, "unit": "fahrenheit"}
    ex = exec_gold(_observed(task, [{"name": gold.name, "arguments": wrong}]), task.ground_truth, WorkerSettings())
    assert ex.components["key"] < 1.0 and ex.matches[0].invented == ("unit",) and not ex.matches[0].exact


def test_a_gold_call_passing_the_default_matches_a_call_omitting_it():
    schemas = {"get_weather": simulated_by_name()["get_weather"]["function"]["parameters"]}
    gold = [GoldCall(name="get_weather", arguments={"city": "Oslo", "unit": "celsius"})]
    (m,) = match_calls(gold, [("get_weather", {"city": "Oslo"})], schemas)
    assert m.exact and m.key == 0.5  # the same call; HierR's key Jaccard still sees one key left out
    (m,) = match_calls(gold, [("get_weather", {"city": "Oslo"})])  # no schemas: no default to stand in
    assert not m.correct and m.key == 0.5
    assert GroundTruth(calls=gold).tool_needed
