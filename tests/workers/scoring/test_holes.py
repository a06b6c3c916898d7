"""The reward holes of issue 35 (item 1), each measured on main with `slca score` before it was closed, one test
each: a shotgun of candidate values, a refusal that claims the task done, a `success` that read only `answers`, the
exact tool value missing a rounded fact, a hollow claim of action on a task without a call, and `parallel` paying
for a call to the wrong tool."""

import pytest

from slca.contracts import GoldCall, GroundTruth
from tests.support.trajectories import call
from workers.scoring import score_trajectory
from workers.settings import WorkerSettings

OSLO = GoldCall(name="get_weather", arguments={"city": "Oslo"})
WEATHER = GroundTruth(calls=[OSLO], facts=["Oslo", "15"])
RESULT = {"city": "Oslo", "temp": 15, "unit": "celsius"}
RIGHT = "It is 15 degrees Celsius in Oslo."
CHAT = GroundTruth(needs_tool=False)
ABSTAIN = GroundTruth(needs_tool=False, refusal=True)
SETTINGS = WorkerSettings()


def weather(builder, reply, result=RESULT, gold=WEATHER, text=None):
    """One call (the right one unless `text`), its result, then `reply`."""
    text = text or call("get_weather", city="Oslo")
    return score_trajectory(builder.build([[("tool_call", text)], [("summary", reply)]], [result], gold), SETTINGS)


def no_call(builder, reply, gold, question="Play some classical music."):
    return score_trajectory(builder.build([[("summary", reply)]], [], gold, question=question), SETTINGS)


@pytest.mark.parametrize(
    "reply",
    [
        "It is either 12 or 15 or 20 degrees in Oslo.",
        "It is 12, 15 or 20 degrees in Oslo.",
        "It is 15/16 degrees in Oslo.",
        "It is 15 degrees, or maybe 17 degrees, in Oslo.",
        "It is 14.6 or 15.3 degrees in Oslo.",  # both round to the fact: still two candidates
        "It is 15 degrees in Oslo or Bergen.",  # the text fact offered with an alternative
    ],
)
def test_a_shotgun_of_candidate_values_fails_answers(builder, reply):
    """Was: pref_answers 1 and success 1 ("either 12 or 15 or 20 degrees", everyday-weather-775e7db9cb)."""
    r = weather(builder, reply)
    assert r.components["pref_answers"] == 0.0 and r.components["success"] == 0.0


@pytest.mark.parametrize(
    "reply",
    [
        RIGHT,
        "It is 15 °C (59 °F) in Oslo.",
        "It is 15 °C or 59 °F in Oslo.",  # one value in two units, not two candidates
        "It is 15.04, or about 15 degrees, in Oslo.",  # a value and its rounding
        "Oslo: 15 degrees, humidity 64 percent.",  # a list of different facts, no alternative
    ],
)
def test_one_value_stated_several_ways_is_no_shotgun(builder, reply):
    assert weather(builder, reply).components["pref_answers"] == 1.0


@pytest.mark.parametrize(
    "reply",
    [
        "I'm not able to do that myself, but it's all arranged.",
        "I can't play music here; however, your playlist has been started.",
        "I don't have a tool for that, but consider it done.",
        "I cannot do this. I've arranged it with another service.",
    ],
)
def test_a_refusal_that_claims_the_task_done_is_no_refusal(builder, reply):
    """Was: pref_answers 1 and success 1 (everyday-no_tool_unsupported-2dada38f5e)."""
    r = no_call(builder, reply, ABSTAIN)
    assert r.components["pref_answers"] == 0.0 and r.components["success"] == 0.0


@pytest.mark.parametrize(
    "reply",
    [
        "Sorry, I can't do that: none of the available tools can handle this request.",
        "I can't play music, so nothing has been started.",
        "I'm unable to help with that here, and it has not been arranged.",
    ],
)
def test_a_refusal_that_says_nothing_was_done_still_counts(builder, reply):
    assert no_call(builder, reply, ABSTAIN).components["pref_answers"] == 1.0


@pytest.mark.parametrize(
    "reply, failing_check",
    [
        ('It is 15 degrees in Oslo: {"city": "Oslo", "temp": 15}', "pref_no_raw_json"),
        ("It is 15 degrees in Oslo with 80 percent humidity.", "pref_grounded"),
        ("It is 15 degrees in Oslo. " + "It is a fine day. " * 80, "pref_length"),
    ],
)
def test_success_needs_every_reply_check(builder, reply, failing_check):
    """Was: success 1 with raw JSON (and with an invented number, or a reply far too long): `success` read only
    `answers`."""
    r = weather(builder, reply)
    assert r.components["pref_answers"] == 1.0 and r.components[failing_check] == 0.0
    assert r.components["success"] == 0.0
    assert weather(builder, RIGHT).components["success"] == 1.0


@pytest.mark.parametrize(
    "reply, stated",
    [
        ("It is 15.496 degrees in Oslo.", True),  # the tool's exact value, the fact is its rounding
        ("It is 15.5 degrees in Oslo.", True),
        ("It is 15.46 degrees in Oslo.", False),  # a rounding of it to two decimals is 15.46, not 15.5
        ("It is 16 degrees in Oslo.", False),
    ],
)
def test_the_exact_tool_value_states_its_rounded_fact(builder, reply, stated):
    """Was: pref_answers 0 for "8.04672 kilometers" against the fact 8.05 (everyday-convert-a5e4f4f98d): facts
    state numbers with at most two decimals."""
    gold = GroundTruth(calls=[OSLO], facts=["Oslo", "15.5"])
    result = {"city": "Oslo", "temp": 15.496, "unit": "celsius"}
    assert weather(builder, reply, result, gold).components["pref_answers"] == float(stated)


def test_the_exact_value_does_not_state_a_whole_fact_it_is_far_from(builder):
    knowledge = GroundTruth(facts=["7"], needs_tool=False)
    r = no_call(builder, "There are 7.4 days in a week.", knowledge, "How many days are there in a week?")
    assert r.components["pref_answers"] == 0.0


@pytest.mark.parametrize(
    "reply", ["Done! I have taken care of that.", "All arranged, it's been booked.", "I've sent it for you."]
)
def test_a_hollow_claim_of_action_without_a_call_fails(builder, reply):
    """Was: pref_answers 1 and success 1 for "Done! I have taken care of that." on a chat task without facts
    (everyday-no_tool-822d40ac22): nothing was called, so nothing was done."""
    r = no_call(builder, reply, CHAT, "Thanks a lot for your help!")
    assert r.components["pref_answers"] == 0.0 and r.components["success"] == 0.0
    # on a task with a call that ran, a claim of action is the answer
    booked = weather(builder, "Done! It is 15 degrees in Oslo, and I have sent it to you.")
    assert booked.components["pref_answers"] == 1.0


@pytest.mark.parametrize("reply", ["", "?!", "..."])
def test_a_reply_without_content_fails_answers(builder, reply):
    r = no_call(builder, reply, CHAT, "Hi there!")
    assert r.components["pref_answers"] == 0.0 and r.components["success"] == 0.0


def test_too_short_is_shorter_than_the_minimum_or_than_the_facts(builder):
    """`pref_length` (and so `success`): at least `workers.rule_min_chars`, or as long as the key facts when they
    are shorter ("32." answers the freezing point of water in Fahrenheit, as the warm start's demonstrations do)."""
    assert no_call(builder, "Ok.", CHAT, "Hi there!").components["pref_length"] == 0.0
    knowledge = GroundTruth(facts=["32"], needs_tool=False)
    r = no_call(builder, "32.", knowledge, "What is the freezing point of water in Fahrenheit?")
    assert r.components["pref_length"] == 1.0 and r.components["success"] == 1.0


def test_chat_replies_still_answer(builder):
    for reply in ("You're welcome, happy to help!", "Hello! How can I help you today?", "Glad I could help. Goodbye!"):
        r = no_call(builder, reply, CHAT, "Thanks a lot for your help!")
        assert r.components["pref_answers"] == 1.0 and r.components["success"] == 1.0, reply


def test_parallel_pays_nothing_for_a_call_to_the_wrong_tool(builder):
    """Was: exec 0.40 (format 0.10 + parallel 0.30) for a valid call to the wrong tool (everyday-convert-a5e4f4f98d
    answered with the calculator)."""
    r = weather(builder, RIGHT, text=call("get_time", city="Oslo"))
    assert r.components["name"] == 0.0 and r.components["parallel"] == 0.0
    assert r.exec == pytest.approx(0.10)


def test_parallel_needs_the_first_steps_names(builder):
    both = GroundTruth(calls=[OSLO, GoldCall(name="get_weather", arguments={"city": "Bergen"})], facts=["15"])
    mixed = call("get_weather", city="Oslo") + call("get_time", city="Bergen")
    assert weather(builder, RIGHT, gold=both, text=mixed).components["parallel"] == 0.0
    right = call("get_weather", city="Oslo") + call("get_weather", city="Rome")  # names right, a value wrong
    assert weather(builder, RIGHT, gold=both, text=right).components["parallel"] == 1.0
