"""HierR against hand-computed values (docs/design.md#hierr weights: .10 format, .25 name, .15 key, .20 value,
.30 parallel)."""

import pytest

from slca.contracts import GoldCall, GroundTruth, ToolCallRecord
from tests.support.trajectories import call
from workers.scoring import score_trajectory

PARIS = GoldCall(name="get_weather", arguments={"city": "Paris", "unit": "celsius"})
ROME = GoldCall(name="get_weather", arguments={"city": "Rome", "unit": "celsius"})
TOKYO_TIME = GoldCall(name="get_time", arguments={"city": "Tokyo"})
GOOD_REPLY = "It is 18 degrees Celsius in Paris right now."
RESULT = {"temp": 18, "unit": "celsius"}


def gt(*calls, facts=("18",), **kw):
    return GroundTruth(calls=list(calls), facts=list(facts), **kw)


def exec_parts(r):
    return {k: r.components[k] for k in ("format", "name", "key", "value", "parallel")}


def test_perfect_single_call_loose_values(builder, settings):
    traj = builder.build(
        [[("tool_call", call("get_weather", city=" paris ", unit="CELSIUS"))], [("summary", GOOD_REPLY)]],
        [RESULT],
        gt(PARIS),
    )
    r = score_trajectory(traj, settings)
    assert exec_parts(r) == {"format": 1.0, "name": 1.0, "key": 1.0, "value": 1.0, "parallel": 1.0}
    assert r.exec == pytest.approx(1.0)
    assert r.pref == 1.0 and not r.omission_penalized
    assert r.components["success"] == 1.0 and r.components["action"] == 1.0
    assert [(c.turn, c.score, c.name) for c in r.per_call] == [(0, 1.0, "get_weather")]
    assert {
        "format",
        "name",
        "key",
        "value",
        "parallel",
        "pref_grounded",
        "pref_answers",
        "pref_no_raw_json",
        "pref_length",
        "pref_raw",
        "success",
        "action",
        "call_accuracy",
        "completeness",
        "repeated_calls",
        "failed_calls",
        "invalid_format",
        "num_calls",
        "tool_turns",
    } <= set(r.components)


def test_parallel_calls_in_one_turn_vs_sequential(builder, settings):
    both = call("get_weather", city="Paris", unit="celsius") + "\n" + call("get_weather", city="Rome", unit="celsius")
    parallel = builder.build([[("tool_call", both)], [("summary", GOOD_REPLY)]], [RESULT], gt(PARIS, ROME))
    r = score_trajectory(parallel, settings)
    assert r.components["parallel"] == 1.0 and r.exec == pytest.approx(1.0)
    sequential = builder.build(
        [
            [("tool_call", call("get_weather", city="Paris", unit="celsius"))],
            [("tool_call", call("get_weather", city="Rome", unit="celsius"))],
            [("summary", GOOD_REPLY)],
        ],
        [RESULT, RESULT],
        gt(PARIS, ROME),
    )
    r = score_trajectory(sequential, settings)
    assert exec_parts(r) == {"format": 1.0, "name": 1.0, "key": 1.0, "value": 1.0, "parallel": 0.0}
    assert r.exec == pytest.approx(0.70)
    assert [(c.turn, c.score) for c in r.per_call] == [(0, 1.0), (1, 1.0)]


def test_missing_call(builder, settings):
    traj = builder.build(
        [[("tool_call", call("get_weather", city="Paris", unit="celsius"))], [("summary", GOOD_REPLY)]],
        [RESULT],
        gt(PARIS, TOKYO_TIME),
    )
    r = score_trajectory(traj, settings)
    # name F1: precision 1, recall 1/2 → 2/3; key/value: one of two gold calls matched → 1/2; parallel 1 vs 2 → 0
    assert r.components["name"] == pytest.approx(2 / 3)
    assert (r.components["key"], r.components["value"], r.components["parallel"]) == (0.5, 0.5, 0.0)
    assert r.exec == pytest.approx(0.10 + 0.25 * 2 / 3 + 0.15 * 0.5 + 0.20 * 0.5)
    assert (r.components["action"], r.components["completeness"], r.components["success"]) == (0.5, 0.5, 0.0)


def test_extra_call(builder, settings):
    text = call("get_weather", city="Paris", unit="celsius") + call("get_time", city="Paris")
    traj = builder.build([[("tool_call", text)], [("summary", GOOD_REPLY)]], [RESULT], gt(PARIS))
    r = score_trajectory(traj, settings)
    assert r.components["name"] == pytest.approx(2 / 3)  # precision 1/2, recall 1
    assert (r.components["key"], r.components["value"], r.components["parallel"]) == (1.0, 1.0, 0.0)
    assert r.exec == pytest.approx(0.10 + 0.25 * 2 / 3 + 0.15 + 0.20)
    assert [c.score for c in r.per_call] == [1.0, 0.0]  # the extra call earns nothing
    assert r.components["action"] == 1.0 and r.components["success"] == 0.0  # an extra call is not the task done


def test_wrong_argument_types(builder, settings):
    gold = GoldCall(name="get_forecast", arguments={"city": "Paris", "days": 3, "metric": True})
    traj = builder.build(
        [[("tool_call", call("get_forecast", city="paris", days="3", metric="true"))], [("summary", GOOD_REPLY)]],
        [RESULT],
        gt(gold),
    )
    r = score_trajectory(traj, settings)
    # "3" is not 3 (type error); "true" loosely equals True; "paris" equals "Paris"
    assert r.components["value"] == pytest.approx(2 / 3) and r.components["key"] == 1.0
    assert r.exec == pytest.approx(0.10 + 0.25 + 0.15 + 0.20 * 2 / 3 + 0.30)
    assert r.components["action"] == 0.0 and r.components["completeness"] == 0.0  # RLTR's coverage reads values
    assert r.per_call[0].score == pytest.approx((1 + 1 + 2 / 3) / 3)


def test_malformed_json_next_to_a_valid_call(builder, settings):
    bad = '<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}}\n</tool_call>'
    good = call("get_weather", city="Paris", unit="celsius")
    traj = builder.build([[("tool_call", bad + good)], [("summary", GOOD_REPLY)]], [RESULT], gt(PARIS))
    r = score_trajectory(traj, settings)
    # 1 of 2 blocks well-formed; the first turn holds an invalid call: parallel 0
    assert exec_parts(r) == {"format": 0.5, "name": 1.0, "key": 1.0, "value": 1.0, "parallel": 0.0}
    assert r.exec == pytest.approx(0.65)
    assert r.components["success"] == 0.0
    assert r.components["invalid_format"] == 1.0
    assert [c.score for c in r.per_call] == [0.0, 1.0]


def test_only_malformed_json_triggers_omission_guard(builder, settings):
    bad = '<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}\n</tool_call>'
    traj = builder.build([[("tool_call", bad)], [("summary", GOOD_REPLY)]], [RESULT], gt(PARIS))
    r = score_trajectory(traj, settings)
    assert r.exec == 0.0 and r.components["format"] == 0.0
    assert r.pref == -0.5 and r.omission_penalized and r.components["pref_raw"] == 1.0


@pytest.mark.parametrize("inline", [False, True])
def test_calls_inside_reasoning_do_not_count(builder, settings, inline):
    thought = "<think>I could use " + call("get_weather", city="Paris", unit="celsius") + " but I guess.</think>"
    parts = [("summary", thought + GOOD_REPLY)] if inline else [("reasoning", thought), ("summary", GOOD_REPLY)]
    traj = builder.build([parts], [], gt(PARIS))
    r = score_trajectory(traj, settings)
    assert r.components["num_calls"] == 0.0
    assert r.exec == 0.0  # format 0 (a call was expected), name 0, key 0, value 0, parallel 0 ≠ 1
    assert r.omission_penalized and r.pref == -0.5


def test_no_tool_needed(builder, settings):
    chat = gt(facts=(), needs_tool=False)
    traj = builder.build([[("summary", "Hello! How can I help you today?")]], [], chat, question="Hi there")
    r = score_trajectory(traj, settings)
    assert r.exec == 1.0 and r.pref == 1.0 and not r.omission_penalized and r.components["success"] == 1.0
    called = builder.build(
        [[("tool_call", call("get_time", city="Paris"))], [("summary", "It is noon in Paris.")]],
        [{"time": "12:00"}],
        chat,
        question="Hi there",
    )
    r = score_trajectory(called, settings)
    # format 1, name F1 0 (gold empty), key/value 0 (a call where none expected), parallel 0
    assert r.exec == pytest.approx(0.10)
    assert r.components["completeness"] == 0.0 and not r.omission_penalized


def test_omission_guard_only_touches_the_summary_channel(builder, settings):
    traj = builder.build([[("summary", GOOD_REPLY)]], [], gt(PARIS))
    r = score_trajectory(traj, settings)
    assert r.omission_penalized and r.pref == -0.5
    assert r.components["pref_raw"] == 0.75  # the judge's own verdict is kept (18 is stated with no result: ungrounded)
    assert r.exec == 0.0
    custom = score_trajectory(traj, settings.model_copy(update={"no_call_penalty": -1.0}))
    assert custom.pref == -1.0


@pytest.mark.parametrize(
    "reply, level",
    [
        (GOOD_REPLY, 1.0),
        ('{"temp": 18, "unit": "celsius"}', 0.75),  # raw JSON dumped
        ("It is warm.", 0.5),  # not grounded, no key fact, but clean and long enough
        ('{"weather": "warm"}', 0.25),  # only a sensible length
        ("18", 1.0),  # grounded, states the fact, clean, and a reply need not be longer than its facts
        ("", 0.0),
    ],
)
def test_rule_judge_levels(builder, settings, reply, level):
    turns = [[("tool_call", call("get_weather", city="Paris", unit="celsius"))]]
    if reply:
        turns.append([("summary", reply)])
    traj = builder.build(turns, [RESULT], gt(PARIS))
    assert score_trajectory(traj, settings).pref == level


def test_exec_outcome_without_gold_calls(builder, settings):
    needs = GroundTruth(needs_tool=True)
    ok = builder.build(
        [[("tool_call", call("get_weather", city="Paris"))], [("summary", GOOD_REPLY)]],
        [RESULT],
        needs,
        tool_calls=[ToolCallRecord(turn=0, block=0, name="get_weather", arguments={"city": "Paris"}, result=RESULT)],
    )
    r = score_trajectory(ok, settings)
    assert r.components["exec_outcome_mode"] == 1.0 and r.exec == 1.0
    bad = builder.build(
        [[("tool_call", call("get_weather", city=5))], [("summary", GOOD_REPLY)]],
        [RESULT],
        needs,
        tool_calls=[
            ToolCallRecord(
                turn=0, block=0, name="get_weather", arguments={"city": 5}, error="400: city must be a string"
            )
        ],
    )
    r = score_trajectory(bad, settings)
    assert (r.components["outcome_valid"], r.components["outcome_executed"], r.components["outcome_complete"]) == (
        0.0,
        0.0,
        0.0,
    )
    assert r.exec == 0.0 and r.components["failed_calls"] == 1.0


def test_repeated_calls_counted(builder, settings):
    same = call("get_time", city="Tokyo")
    traj = builder.build(
        [[("tool_call", same)], [("tool_call", same)], [("summary", "It is 9:00 in Tokyo.")]],
        [{"time": "9:00"}] * 2,
        gt(TOKYO_TIME, facts=("9:00",)),
    )
    r = score_trajectory(traj, settings)
    assert r.components["repeated_calls"] == 1.0 and r.components["name"] == pytest.approx(2 / 3)


def test_deterministic_and_scored_from_the_servers_records_not_the_tokens(builder, settings):
    """One parse, in the server: the scorer reads `Trajectory.tool_calls` (schema 2) and decodes no token. A
    trajectory whose records say Rome while its tokens say Paris scores as Rome."""
    traj = builder.build(
        [[("tool_call", call("get_weather", city="Paris", unit="celsius"))], [("summary", GOOD_REPLY)]],
        [RESULT],
        gt(PARIS),
    )
    a, b = score_trajectory(traj, settings), score_trajectory(traj, settings)
    assert a == b and a.exec == pytest.approx(1.0)
    rome = [ToolCallRecord(turn=0, block=0, name="get_weather", arguments={"city": "Rome", "unit": "celsius"})]
    r = score_trajectory(traj.model_copy(update={"tool_calls": rome}), settings)
    assert r.components["value"] == 0.5 and r.exec == pytest.approx(0.90)
    # a record naming a tool the trajectory does not offer never counts as valid, whatever the producer said
    fake = [ToolCallRecord(turn=0, block=0, name="fake_tool", arguments={"city": "Paris"}, valid=True)]
    assert score_trajectory(traj.model_copy(update={"tool_calls": fake}), settings).components["format"] == 0.0


def test_records_without_their_block_are_refused_by_the_contract():
    """Schema 2 requires `block` (the scorer's `format` and `parallel` are per block)."""
    from slca.contracts import ContractError
    from slca.contracts.wire import validate

    with pytest.raises(ContractError, match="block"):
        validate(ToolCallRecord, {"turn": 0, "name": "get_weather", "arguments": {}})


def test_invented_tool_counts_in_name_f1_and_breaks_parallel(builder, settings):
    """docs/design.md#hierr: name F1 is over the called tool names, invented ones included (they cost
    precision). Parallel counts the valid calls of the first turn, and any invalid call there makes it 0: an
    invented tool never makes up the count."""
    text = call("get_weather", city="Paris", unit="celsius") + call("fake_tool", city="Paris")
    invented = builder.build([[("tool_call", text)], [("summary", GOOD_REPLY)]], [RESULT], gt(PARIS))
    r = score_trajectory(invented, settings)
    # format: 1 of 2 blocks names an offered tool; name F1: precision 1/2, recall 1; parallel: 2 calls vs 1
    assert exec_parts(r) == {"format": 0.5, "name": pytest.approx(2 / 3), "key": 1.0, "value": 1.0, "parallel": 0.0}
    assert r.exec == pytest.approx(0.05 + 0.25 * 2 / 3 + 0.15 + 0.20)
    extra_real = call("get_weather", city="Paris", unit="celsius") + call("get_time", city="Paris")
    real = score_trajectory(
        builder.build([[("tool_call", extra_real)], [("summary", GOOD_REPLY)]], [RESULT], gt(PARIS)), settings
    )
    assert r.exec < real.exec  # an invented tool never costs less than an extra real call
