"""Reward shaping has one home, the scorer (docs/design.md#hierr): the omission guard on r_pref and RLTR's planner
reward (component `rltr_plan`: −1 for invalid format, else completeness − μ·repeated − λ·failed). The learner
reads them; these tests hold the rules and that each value is one `workers` setting."""

import pytest

from slca.contracts import GoldCall, GroundTruth, ToolCallRecord
from tests.support.trajectories import call
from workers.scoring import score_trajectory

PARIS = GoldCall(name="get_weather", arguments={"city": "Paris"})
REPLY = "It is 18 degrees in Paris."
GOOD = call("get_weather", city="Paris")
INVALID_BLOCKS = {
    "unknown_tool": call("fake_tool", city="Paris"),
    "arguments_not_an_object": '<tool_call>\n{"name": "get_weather", "arguments": "Paris"}\n</tool_call>',
    "arguments_a_list": '<tool_call>\n{"name": "get_weather", "arguments": ["Paris"]}\n</tool_call>',
    "no_name": '<tool_call>\n{"arguments": {"city": "Paris"}}\n</tool_call>',
    "not_json": '<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}}\n</tool_call>',
    "not_an_object": "<tool_call>\n42\n</tool_call>",
}


def build(builder, text, records=None, needs_tool=None):
    truth = GroundTruth(calls=[PARIS], facts=["18"], needs_tool=needs_tool)
    return builder.build([[("tool_call", text)], [("summary", REPLY)]], [{"temp": 18}], truth, tool_calls=records)


@pytest.mark.parametrize("case", sorted(INVALID_BLOCKS))
def test_rltr_invalid_format_is_any_block_not_naming_an_offered_tool_with_object_arguments(builder, settings, case):
    r = score_trajectory(build(builder, GOOD + INVALID_BLOCKS[case]), settings)
    assert r.components["invalid_format"] == 1.0
    assert r.components["format"] == 0.5  # the same test as HierR's `format`, block by block
    assert r.components["rltr_plan"] == -1.0


def test_rltr_plan_is_completeness_minus_repeat_and_failure_penalties_from_worker_settings(builder, settings):
    records = [
        ToolCallRecord(turn=0, block=0, name="get_weather", arguments={"city": "Paris"}, error="503: unavailable"),
        ToolCallRecord(turn=0, block=1, name="get_weather", arguments={"city": "Paris"}, result={"temp": 18}),
    ]
    traj = build(builder, GOOD + GOOD, records)
    r = score_trajectory(traj, settings)
    assert (r.components["completeness"], r.components["repeated_calls"], r.components["failed_calls"]) == (1, 1, 1)
    assert r.components["rltr_plan"] == pytest.approx(1.0 - 0.2 - 0.1)
    custom = settings.model_copy(
        update={"rltr_repeat_penalty": 0.5, "rltr_fail_penalty": 0.25, "rltr_format_penalty": -2.0}
    )
    assert score_trajectory(traj, custom).components["rltr_plan"] == pytest.approx(0.25)
    bad = build(builder, INVALID_BLOCKS["unknown_tool"])
    assert score_trajectory(bad, custom).components["rltr_plan"] == -2.0


def test_omission_guard_setting_and_rule__a_call_to_an_unknown_tool_is_an_omission(builder, settings):
    """Choice (the guard says 'no parseable call'): parseable = valid, a JSON object naming an offered tool with object
    arguments. A call to an invented tool calls nothing the task could use: the guard fires."""
    invented = score_trajectory(build(builder, INVALID_BLOCKS["unknown_tool"]), settings)
    assert invented.omission_penalized and invented.pref == -0.5
    nameless = build(builder, INVALID_BLOCKS["no_name"])
    assert score_trajectory(nameless, settings).pref == -0.5
    off = score_trajectory(nameless, settings.model_copy(update={"omission_guard": False}))
    assert not off.omission_penalized and off.pref == off.components["pref_raw"]
    valid = score_trajectory(build(builder, GOOD), settings)
    assert not valid.omission_penalized and valid.pref == valid.components["pref_raw"]
