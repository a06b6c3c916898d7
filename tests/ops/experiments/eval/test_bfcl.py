"""BFCL scoring with the official checker: gold answers pass, wrong ones fail, irrelevance inverts."""

import pytest

from ops.experiments.eval.bfcl import CATEGORIES, load_category, score, to_json_schema
from slca.chat.hermes import render_tool_calls


def gold_completion(case) -> str:
    """The first possible value of every argument (skipping optional ones marked with '')."""
    calls = []
    for call in case.answer:
        ((name, params),) = call.items()
        args = {k: v[0] for k, v in params.items() if v and v[0] != ""}
        calls.append({"name": name, "arguments": args})
    return render_tool_calls(calls)


@pytest.mark.parametrize("category", [c for c in CATEGORIES if c != "irrelevance"])
def test_gold_answers_pass_the_official_checker(category):
    cases = load_category(category, limit=8)
    assert len(cases) == 8 and all(c.answer for c in cases)
    verdicts = [score(c, gold_completion(c))["valid"] for c in cases]
    assert sum(verdicts) >= 7, [score(c, gold_completion(c)) for c in cases]


@pytest.mark.parametrize("category", ["simple_python", "parallel"])
def test_wrong_or_missing_calls_fail(category):
    case = load_category(category, limit=1)[0]
    assert not score(case, "I think the answer is 42.")["valid"]
    assert not score(case, '<tool_call>\n{"name": "nonexistent", "arguments": {}}\n</tool_call>')["valid"]


def test_irrelevance_rewards_not_calling():
    case = load_category("irrelevance", limit=1)[0]
    assert case.answer is None
    assert score(case, "None of the functions can answer that.")["valid"]
    name = case.functions[0]["name"]
    assert not score(case, f'<tool_call>\n{{"name": "{name}", "arguments": {{}}}}\n</tool_call>')["valid"]


def test_bfcl_types_become_json_schema():
    schema = {
        "type": "dict",
        "properties": {
            "x": {"type": "float"},
            "xs": {"type": "tuple", "items": {"type": "dict", "properties": {"y": {"type": "any"}}}},
        },
    }
    out = to_json_schema(schema)
    assert out["type"] == "object" and out["properties"]["x"]["type"] == "number"
    assert out["properties"]["xs"]["type"] == "array" and out["properties"]["xs"]["items"]["type"] == "object"
    assert "type" not in out["properties"]["xs"]["items"]["properties"]["y"]


def test_unknown_category_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown BFCL category"):
        load_category("live_java")
