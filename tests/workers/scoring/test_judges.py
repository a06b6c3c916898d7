"""The OpenAI-compatible judge against a small local HTTP endpoint (a stand-in for a vLLM server)."""

import pytest

from slca.contracts import GoldCall, GroundTruth
from tests.workers.judge_endpoint import Endpoint
from tests.support.trajectories import call
from workers.scoring import TransientJudgeError, score_trajectory
from workers.scoring.judges import JUDGES, get_judge


@pytest.fixture
def endpoint():
    e = Endpoint()
    yield e
    e.close()


@pytest.fixture
def traj(builder):
    gt = GroundTruth(calls=[GoldCall(name="get_weather", arguments={"city": "Paris"})], facts=["18"])
    return builder.build(
        [[("tool_call", call("get_weather", city="Paris"))], [("summary", "It is 18 degrees.")]], [{"temp": 18}], gt
    )


def test_registry_knows_both_judges_and_rejects_unknown():
    assert {"rule", "openai"} <= set(JUDGES)
    with pytest.raises(ValueError, match="unknown judge"):
        get_judge("nope")


@pytest.mark.parametrize("reply, pref", [("4", 0.75), ("Rating: 5", 1.0), ("1", 0.0), ("no idea", 0.0)])
def test_openai_judge_maps_five_levels(endpoint, traj, settings, reply, pref):
    endpoint.reply = reply
    s = settings.model_copy(update={"judge": "openai", "judge_url": endpoint.url})
    r = score_trajectory(traj, s)
    assert r.pref == pref and r.judge == "openai"
    assert r.components["judge_unparsed"] == float(reply == "no idea")
    prompt = endpoint.prompts[-1]
    assert "What is the weather in Paris?" in prompt and "It is 18 degrees." in prompt and '"temp": 18' in prompt


def test_openai_judge_retries_transient_errors_then_raises(endpoint, traj, settings):
    endpoint.status = 503
    s = settings.model_copy(update={"judge": "openai", "judge_url": endpoint.url, "judge_retries": 2})
    with pytest.raises(TransientJudgeError):
        score_trajectory(traj, s)
    assert len(endpoint.prompts) == 3  # first try + 2 retries
