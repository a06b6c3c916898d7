"""Each shortcut the HierR reward paid for (measured on main with `slca score`), one test each: a right tool with
wrong or missing arguments, schema defaults as free credit, invented tools counted as calls, trivial reply checks
(substring facts, grounding by a lone digit, nothing to check) and a `success` that ignored invented calls."""

import pytest

from slca.contracts import GoldCall, GroundTruth
from tests.support.trajectories import TOOLS, call
from workers.scoring import score_trajectory

PARIS = GoldCall(name="get_weather", arguments={"city": "Paris"})
ROME = GoldCall(name="get_weather", arguments={"city": "Rome"})
RESULT = {"temp": 18, "unit": "celsius"}
REPLY = "It is 18 degrees Celsius in Paris."
REFUSAL = "Sorry, I can't do that: none of the available tools can handle this request."
CLAIM = "Done! I have taken care of that"


def with_unit_default(traj):
    """The trajectory offering get_weather with `unit` defaulting to celsius (as the everyday pack's does)."""
    tools = [dict(t, function={**t["function"]}) for t in TOOLS]
    weather = tools[0]["function"]
    weather["parameters"] = {
        **weather["parameters"],
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "default": "celsius"}},
    }
    return traj.model_copy(update={"tools": tools})


def one_call(builder, text, gold, reply=REPLY, result=RESULT, **kw):
    return builder.build([[("tool_call", text)], [("summary", reply)]], [result], gold, **kw)


def test_schema_defaults_earn_no_key_or_value_credit(builder, settings):
    """Gold omits `unit` (default celsius): a call with the wrong city, or with no arguments, used to collect the
    filled-in default as a matching key and value (0.85 and 0.74 on the everyday `convert` task)."""
    gold = GroundTruth(calls=[PARIS], facts=["18"])
    wrong = score_trajectory(with_unit_default(one_call(builder, call("get_weather", city="Rome"), gold)), settings)
    assert (wrong.components["key"], wrong.components["value"]) == (1.0, 0.0)
    assert wrong.exec == pytest.approx(0.10 + 0.25 + 0.15 + 0.30) and wrong.components["success"] == 0.0
    empty = score_trajectory(with_unit_default(one_call(builder, call("get_weather"), gold)), settings)
    assert (empty.components["key"], empty.components["value"]) == (0.0, 0.0)
    assert empty.exec == pytest.approx(0.10 + 0.25 + 0.30) and empty.components["success"] == 0.0


def test_passing_the_default_explicitly_is_the_same_call_for_success_not_for_key(builder, settings):
    gold = GroundTruth(calls=[PARIS], facts=["18"])
    explicit = score_trajectory(
        with_unit_default(one_call(builder, call("get_weather", city="Paris", unit="celsius"), gold)), settings
    )
    assert explicit.components["key"] == 0.5 and explicit.components["value"] == 1.0
    assert explicit.components["success"] == 1.0 and explicit.components["call_accuracy"] == 1.0
    other = score_trajectory(
        with_unit_default(one_call(builder, call("get_weather", city="Paris", unit="kelvin"), gold)), settings
    )
    assert other.components["success"] == 0.0 and other.components["call_accuracy"] == 0.0


def test_an_invented_argument_fails_success(builder, settings):
    gold = GroundTruth(calls=[PARIS], facts=["18"])
    r = score_trajectory(one_call(builder, call("get_weather", city="Paris", unit="kelvin"), gold), settings)
    assert r.components["value"] == 1.0 and r.components["key"] == 0.5
    assert r.components["success"] == 0.0 and r.components["action"] == 0.0
    assert r.components["completeness"] == 1.0  # RLTR's coverage: every gold value is there


def test_gold_calls_without_arguments_count_in_key_and_value(builder, settings):
    ping = GoldCall(name="get_time", arguments={})
    gold = GroundTruth(calls=[ping], facts=["9:00"])
    invented = score_trajectory(
        one_call(builder, call("get_time", city="Tokyo"), gold, "It is 9:00.", {"time": "9:00"}), settings
    )
    assert invented.components["key"] == 0.0 and invented.components["success"] == 0.0
    bare = score_trajectory(one_call(builder, call("get_time"), gold, "It is 9:00.", {"time": "9:00"}), settings)
    assert (bare.components["key"], bare.components["value"], bare.components["success"]) == (1.0, 1.0, 1.0)
    # an unmatched gold call without arguments scores 0 too (it used to be left out of the average)
    both = GroundTruth(calls=[PARIS, GoldCall(name="get_time", arguments={}, step=1)], facts=["18"])
    half = score_trajectory(one_call(builder, call("get_weather", city="Paris"), both), settings)
    assert (half.components["key"], half.components["value"]) == (0.5, 0.5)


def test_no_gold_calls_key_and_value_are_one_only_without_a_call(builder, settings):
    chat = GroundTruth(needs_tool=False)
    called = builder.build(
        [[("tool_call", call("get_time", city="Paris"))], [("summary", "It is noon in Paris.")]],
        [{"time": "12:00"}],
        chat,
        question="Hi there",
    )
    r = score_trajectory(called, settings)
    assert (r.components["key"], r.components["value"]) == (0.0, 0.0)
    assert r.exec == pytest.approx(0.10) and r.components["success"] == 0.0


def test_parallel_counts_only_valid_calls(builder, settings):
    gold = GroundTruth(calls=[PARIS, ROME], facts=["18"])
    padded = call("get_weather", city="Paris") + call("fake_tool", city="Rome")
    r = score_trajectory(one_call(builder, padded, gold), settings)
    assert r.components["parallel"] == 0.0  # two named calls, one of them invented: not the gold's two
    turns = [
        [("tool_call", call("fake_tool", city="Paris"))],
        [("tool_call", call("get_weather", city="Paris"))],
        [("summary", REPLY)],
    ]
    late = builder.build(turns, [{"ok": True}, RESULT], GroundTruth(calls=[PARIS], facts=["18"]))
    assert score_trajectory(late, settings).components["parallel"] == 0.0


def test_an_invented_tool_does_not_escape_the_omission_guard(builder, settings):
    r = score_trajectory(
        one_call(builder, call("fake_tool", city="Paris"), GroundTruth(calls=[PARIS], facts=["18"])), settings
    )
    assert r.omission_penalized and r.pref == settings.no_call_penalty


def test_invented_or_extra_calls_fail_success(builder, settings):
    gold = GroundTruth(calls=[PARIS], facts=["18"])
    not_json = '<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}}\n</tool_call>'
    good = call("get_weather", city="Paris")
    for text in (good + call("fake_tool", city="Paris"), good + call("get_time", city="Paris"), good + not_json):
        r = score_trajectory(one_call(builder, text, gold), settings)
        assert r.components["success"] == 0.0, text
        assert r.components["action"] == 1.0  # ToolPO's correct calls / gold calls: the gold call was made


@pytest.mark.parametrize(
    "fact, reply, stated",
    [
        ("7", "It was built in 2017.", False),
        ("7", "It takes 7.5 hours.", False),
        ("7", "There are 7 days.", True),
        ("7", "7.", True),
        ("1,250", "That is 1250 dollars.", True),
        ("1250", "That is 1,250 dollars.", True),
        ("12.50", "Each pays 12.5.", True),
        ("12.5", "Each pays 12.50 USD.", True),
        ("5", "About 5km away.", True),
        ("cat", "A category.", False),
        ("Leonardo da Vinci", "It was leonardo  da vinci.", True),
        ("9:00", "It is 19:00.", False),
        ("9:00", "It is 9:00 there.", True),
    ],
)
def test_facts_match_on_word_and_number_boundaries(builder, settings, fact, reply, stated):
    traj = builder.build([[("summary", reply)]], [], GroundTruth(facts=[fact], needs_tool=False), question="Q?")
    assert score_trajectory(traj, settings).components["pref_answers"] == float(stated)


def test_abstention_a_claim_of_success_is_not_a_refusal(builder, settings):
    refusal_task = GroundTruth(needs_tool=False, refusal=True)
    claim = score_trajectory(builder.build([[("summary", CLAIM)]], [], refusal_task, question="Call Ana."), settings)
    right = score_trajectory(builder.build([[("summary", REFUSAL)]], [], refusal_task, question="Call Ana."), settings)
    assert claim.components["pref_answers"] == 0.0 and claim.components["success"] == 0.0
    assert right.components["pref_answers"] == 1.0 and right.components["success"] == 1.0
    assert claim.pref < right.pref == 1.0
    mixed = "I can't call Maria, but here is her number."
    assert (
        score_trajectory(
            builder.build([[("summary", mixed)]], [], refusal_task, question="Call Maria."), settings
        ).components["pref_answers"]
        == 0.0
    )
    turns = [[("tool_call", call("get_time", city="Paris"))], [("summary", REFUSAL)]]
    called = builder.build(turns, [{"time": "12:00"}], refusal_task, question="Call Maria.")
    assert score_trajectory(called, settings).components["success"] == 0.0


def test_a_refusal_on_a_task_that_is_not_one_fails_answers(builder, settings):
    chat = GroundTruth(needs_tool=False)
    r = score_trajectory(builder.build([[("summary", REFUSAL)]], [], chat, question="Hi there"), settings)
    assert r.components["pref_answers"] == 0.0 and r.components["success"] == 0.0
    weather = GroundTruth(calls=[PARIS], facts=["18"])
    r = score_trajectory(
        one_call(builder, call("get_weather", city="Paris"), weather, "It is 18 degrees, but I can't tell you more."),
        settings,
    )
    assert r.components["pref_answers"] == 0.0 and r.components["success"] == 0.0


@pytest.mark.parametrize(
    "result, reply, ok",
    [
        (RESULT, "It is 25 degrees Celsius in Paris.", False),  # cites celsius, invents 25
        ({"count": 1, "unit": "c"}, "It is 12 degrees.", False),  # the lone digit 1 is inside 12
        ({"error": {"status": 503, "message": "unavailable"}}, "It is 18 degrees in Paris.", False),  # after an error
        ({"error": {"status": 503, "message": "unavailable"}}, "The weather service for Paris is unavailable.", True),
        (RESULT, "It is 18 degrees in Paris.", True),
        ({"result": 3.106856, "to_unit": "mi"}, "That is about 3.11 miles.", True),  # rounded as written
        ({"result": 3.106856, "to_unit": "mi"}, "That is about 3.2 miles.", False),
        ({"datetime": "2024-07-05T14:30"}, "It will be 14:30 there.", True),
        ({"datetime": "2027-06-15T02:15", "utc_offset": "-03:00"}, "It is 02:15 there (UTC-03:00).", True),  # hyphen
        (RESULT, "It is warm in Paris.", False),  # no result value cited
    ],
)
def test_grounded_means_the_claims_come_from_the_results(builder, settings, result, reply, ok):
    gold = GroundTruth(calls=[PARIS], facts=[])
    r = score_trajectory(one_call(builder, call("get_weather", city="Paris"), gold, reply, result), settings)
    assert r.components["pref_grounded"] == float(ok)


def test_numbers_from_the_user_and_no_tool_facts_are_grounded(builder, settings):
    err = {"error": {"status": 400, "message": "bad unit"}}
    gold = GroundTruth(calls=[PARIS], facts=[])
    r = score_trajectory(
        one_call(
            builder,
            call("get_weather", city="Paris"),
            gold,
            "I could not get 5 days for you.",
            err,
            question="Weather in Paris for 5 days?",
        ),
        settings,
    )
    assert r.components["pref_grounded"] == 1.0
    knowledge = GroundTruth(facts=["7"], needs_tool=False)
    r = score_trajectory(
        builder.build(
            [[("summary", "There are 7 continents.")]], [], knowledge, question="How many continents are there?"
        ),
        settings,
    )
    assert r.components["pref_grounded"] == 1.0 and r.pref == 1.0 and r.components["success"] == 1.0
    guess = score_trajectory(
        builder.build(
            [[("summary", "There are 8 continents.")]], [], knowledge, question="How many continents are there?"
        ),
        settings,
    )
    assert guess.components["pref_grounded"] == 0.0
