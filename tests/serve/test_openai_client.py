"""The official `openai` client, unchanged, against a real `slca serve` process."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.support.serve import WEATHER_TOOL

MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def client(hf_server):
    return openai.OpenAI(base_url=hf_server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_models_lists_the_served_model(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny-smollm2"]


def test_named_tool_choice_returns_an_openai_tool_call(client):
    out = client.chat.completions.create(
        model="tiny-smollm2",
        messages=MESSAGES,
        tools=[WEATHER_TOOL],
        max_tokens=128,
        seed=3,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER_TOOL["function"]["parameters"])
    assert out.usage.completion_tokens > 0 and out.usage.prompt_tokens > 0


def test_required_tool_choice_calls_an_offered_tool(client):
    other = {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {
                "type": "object",
                "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
                "required": ["zone"],
            },
        },
    }
    out = client.chat.completions.create(
        model="tiny-smollm2",
        messages=MESSAGES,
        tools=[WEATHER_TOOL, other],
        tool_choice="required",
        max_tokens=128,
        seed=5,
    )
    (call,) = out.choices[0].message.tool_calls
    assert call.function.name in {"get_weather", "get_time"}
    assert isinstance(json.loads(call.function.arguments), dict)


def _reassemble(stream) -> dict:
    content, calls, finish = "", {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            slot["id"] = tc.id or slot["id"]
            if tc.function:
                slot["name"] += tc.function.name or ""
                slot["arguments"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    return {"content": content or None, "calls": [calls[k] for k in sorted(calls)], "finish": finish}


def test_streamed_tool_call_deltas_reassemble_into_the_same_message(client):
    kwargs = dict(
        model="tiny-smollm2",
        messages=MESSAGES,
        tools=[WEATHER_TOOL],
        max_tokens=128,
        seed=11,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    full = client.chat.completions.create(**kwargs).choices[0]
    streamed = _reassemble(client.chat.completions.create(stream=True, **kwargs))
    assert streamed["finish"] == full.finish_reason == "tool_calls"
    assert streamed["content"] == full.message.content
    assert [(c["name"], c["arguments"]) for c in streamed["calls"]] == [
        (c.function.name, c.function.arguments) for c in full.message.tool_calls
    ]
    assert all(c["id"] for c in streamed["calls"])


def test_streamed_text_reassembles_and_reports_usage(client):
    kwargs = dict(model="tiny-smollm2", messages=MESSAGES, max_tokens=24, seed=7, temperature=0.8)
    full = client.chat.completions.create(**kwargs).choices[0]
    stream = client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.message.content
    assert chunks[-1].usage.completion_tokens == 24


def test_n_choices_and_logprobs(client):
    out = client.chat.completions.create(
        model="tiny-smollm2", messages=MESSAGES, max_tokens=8, n=3, seed=1, logprobs=True
    )
    assert [c.index for c in out.choices] == [0, 1, 2]
    for c in out.choices:
        assert len(c.logprobs.content) == 8 and all(t.logprob <= 0 for t in c.logprobs.content)
