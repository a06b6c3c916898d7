"""POST /v1/agent/runs: n rollouts of a two-turn task, recorded as exact-token, segment-tagged trajectories."""

from __future__ import annotations

import json
import urllib.request

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from slca.contracts import SegmentKind, Streams, Trajectory, decode_entry
from tests.support.serve import ADMIN_TOKEN, WEATHER_TOOL

TOLERANCE = 2e-3
"""hf engine (fp32, batched, left-padded, KV cache) vs a fresh fp32 teacher-forced forward: same model and
dtype, so only reduction-order noise separates them."""


def post(url: str, body: dict) -> dict:
    # the admin token holds the 'record' scope too: recording needs it (serve/auth.py)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {ADMIN_TOKEN}"}
    req = urllib.request.Request(url, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def group(hf_server, serve_redis):
    import redis

    client = redis.Redis.from_url(serve_redis.url)
    streams = Streams("slca")
    before = client.xlen(streams.trajectories)
    body = {
        "messages": [{"role": "user", "content": "Weather in Oslo, in celsius?"}],
        "tools": [WEATHER_TOOL],
        "task_id": "task-weather-1",
        "n": 4,
        "temperature": 1.0,
        "top_p": 1.0,
        "max_tokens": 96,
        "max_turns": 2,
        "seed": 42,
        "tool_choice": "required",
        "record": True,
        "return_trajectories": True,
    }
    response = post(hf_server.url + "/v1/agent/runs", body)
    entries = client.xrange(streams.trajectories)[before:]
    client.close()
    return response, [decode_entry(Trajectory, fields) for _, fields in entries]


def test_four_trajectories_recorded(group):
    response, recorded = group
    assert response["task_id"] == "task-weather-1" and len(response["runs"]) == 4
    ids = {r["trajectory_id"] for r in response["runs"]}
    assert {t.id for t in recorded} == ids
    assert all(t.task_id == "task-weather-1" and t.policy_version == 0 and not t.mixed_version for t in recorded)
    # the workers group a run's rollouts by this id, whatever versions they were sampled at
    assert {t.group_key for t in recorded} == {response["id"]}


def test_two_turns_with_a_tool_call_and_result(group):
    response, recorded = group
    for run in response["runs"]:
        (call,) = run["tool_calls"]
        assert call["name"] == "get_weather" and call["valid"] and call["turn"] == 0
        assert set(call["result"]) == {"temp", "sky"}  # schema-valid simulated response
        assert run["message"]["role"] == "assistant"
    for traj in recorded:
        kinds = [s.kind for s in traj.segments]
        assert kinds[:2] == [SegmentKind.SYSTEM, SegmentKind.USER]
        assert SegmentKind.TOOL_CALL in kinds and SegmentKind.TOOL_RESULT in kinds
        assert {s.turn for s in traj.segments if s.kind.generated} <= {0, 1}


def test_tokens_decode_to_the_returned_text(group, tiny_model_dir):
    response, recorded = group
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    by_id = {t.id: t for t in recorded}
    for run in response["runs"]:
        traj = by_id[run["trajectory_id"]]
        assert run["trajectory"]["tokens"] == traj.tokens
        for turn, message in enumerate(m for m in traj.messages if m["role"] == "assistant"):
            ids = [
                traj.tokens[i]
                for s in traj.segments
                if s.kind.generated and s.turn == turn
                for i in range(s.start, s.end)
            ]
            if ids and ids[-1] == tok.eos_token_id:
                ids = ids[:-1]
            assert tok.decode(ids, skip_special_tokens=False) == message.get("raw_content", message["content"])
        final = [m for m in traj.messages if m["role"] == "assistant"][-1]
        assert final == run["message"]


def test_segments_cover_every_token_once_with_the_right_kinds(group, tiny_model_dir):
    _, recorded = group
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    for traj in recorded:
        covered = sorted(i for s in traj.segments for i in range(s.start, s.end))
        assert covered == list(range(len(traj.tokens)))
        call_tokens = [
            traj.tokens[i] for s in traj.segments if s.kind == SegmentKind.TOOL_CALL for i in range(s.start, s.end)
        ]
        text = tok.decode(call_tokens, skip_special_tokens=False)
        assert text.startswith("<tool_call>") and "</tool_call>" in text
        assert call_tokens[-1] == tok.eos_token_id  # the end-of-turn token belongs to the segment it closes
        for s in traj.segments:
            generated = all(traj.logprobs[i] is not None for i in range(s.start, s.end))
            assert generated == s.kind.generated


def test_behaviour_logprobs_match_teacher_forced_recompute(group, tiny_model_dir):
    _, recorded = group
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    gaps = []
    for traj in recorded:
        with torch.inference_mode():
            logits = model(torch.tensor([traj.tokens])).logits[0].float()
        logp = torch.log_softmax(logits, -1)
        turn_of = {i: s.turn for s in traj.segments for i in range(s.start, s.end)}
        for i, lp in enumerate(traj.logprobs):
            if lp is None:
                continue
            raw = float(logp[i - 1, traj.tokens[i]])
            if turn_of[i] in traj.meta["constrained_turns"]:
                assert lp >= raw - TOLERANCE  # renormalised over the grammar's allowed tokens: never less likely
            else:
                gaps.append(abs(raw - lp))
    mean, worst = sum(gaps) / len(gaps), max(gaps)
    print(f"hf engine vs teacher-forced fp32: {len(gaps)} tokens, mean |gap| {mean:.2e}, max {worst:.2e}")
    assert worst < TOLERANCE


def test_the_prompt_is_rendered_once_per_request_whatever_n(tiny_model_dir, serve_redis, monkeypatch):
    """The n rollouts of an agent run start from the chunks rendered when the request was checked: one render of
    the prompt per request, not one more per rollout. Every call the policy wrote is in its trajectory with its
    block (schema 2), executed or not."""
    import asyncio

    import serve.prompting
    from tests.support.serve import run_in_app

    renders = []
    real = serve.prompting.message_texts
    monkeypatch.setattr(
        serve.prompting, "message_texts", lambda tok, msgs: renders.append(len(msgs)) or real(tok, msgs)
    )
    body = {
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "tools": [WEATHER_TOOL],
        "n": 3,
        "task_id": "t-once",
        "max_tokens": 24,
        "max_turns": 1,
        "seed": 1,
        "tool_choice": "required",
        "return_trajectories": True,
    }

    async def scenario(client, app):
        response = await client.post("/v1/agent/runs", json=body)
        return response.status, await response.json()

    status, out = asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario))
    assert status == 200 and len(out["runs"]) == 3, out
    assert renders == [2]  # one render of the prompt: the tools' system message and the user message
    for run in out["runs"]:
        traj = Trajectory.model_validate(run["trajectory"])
        # tool_choice=required: the first turn writes a call block, recorded whether or not it ran
        assert traj.tool_calls and all(c.turn == 0 and c.block == 0 for c in traj.tool_calls)
