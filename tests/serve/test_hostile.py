"""Hostile and malformed bodies: always a 4xx naming the field, fast, with the engine still serving after.

Also: /healthz keeps answering while the worst inputs are processed, top_logprobs, bounded metric labels,
linear prompt attribution, and schemas that never make the server fetch a `$ref`.
"""

from __future__ import annotations

import gc
import http.client
import json
import threading
import time
import urllib.request

import pytest
from tests.support.serve import WEATHER_TOOL, raw_post

from ops.bench.hostile import worst_bodies

CHAT, AGENT = "/v1/chat/completions", "/v1/agent/runs"
USER = [{"role": "user", "content": "hi"}]


def _tool(parameters, name: str = "f") -> dict:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _nested_schema(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


LOOKBEHIND = _tool({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=x)y"}}, "required": ["a"]})
FORCE_F = {"type": "function", "function": {"name": "f"}}
HISTORY_CALL = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": "x"}]},
]

# name → (path, body: dict or raw bytes, status, the field the error must name)
CASES = {
    "deep_nesting_100k": (CHAT, b'{"messages": ' + _deep(100_000).encode() + b"}", 400, "messages"),
    "deep_nesting_in_unknown_field": (
        CHAT,
        f'{{"messages": [{{"role": "user", "content": "hi"}}], "x": {_deep(500)}}}'.encode(),
        400,
        "x",
    ),
    "deep_tool_schema": (CHAT, {"messages": USER, "tools": [_tool(_nested_schema(40))]}, 400, "tools"),
    "huge_int": (
        CHAT,
        b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": ' + b"7" * 5000 + b"}",
        400,
        "max_tokens",
    ),
    "huge_int_seed": (
        CHAT,
        b'{"messages": [{"role": "user", "content": "hi"}], "seed": ' + b"9" * 5000 + b"}",
        400,
        "seed",
    ),
    "seed_2_64": (CHAT, {"messages": USER, "seed": 2**64}, 400, "seed"),
    "seed_negative": (CHAT, {"messages": USER, "seed": -1}, 400, "seed"),
    "nan": (CHAT, b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', 400, "temperature"),
    "infinity": (CHAT, b'{"messages": [{"role": "user", "content": "hi"}], "top_p": -Infinity}', 400, "top_p"),
    "float_overflow": (
        CHAT,
        b'{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}',
        400,
        "temperature",
    ),
    "lone_surrogate": (CHAT, b'{"messages": [{"role": "user", "content": "a\\ud800b"}]}', 400, "messages.0.content"),
    "tool_function_string": (
        CHAT,
        {"messages": USER, "tools": [{"type": "function", "function": "x"}]},
        400,
        "tools.0",
    ),
    "tool_not_object": (CHAT, {"messages": USER, "tools": [7]}, 400, "tools.0"),
    "tool_choice_function_string": (
        CHAT,
        {"messages": USER, "tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "function": "x"}},
        400,
        "tool_choice",
    ),
    "schema_dialect_int": (
        CHAT,
        {"messages": USER, "tools": [_tool({"type": "object", "$schema": 5})]},
        400,
        "tools.0",
    ),
    "schema_dialect_list": (
        CHAT,
        {"messages": USER, "tools": [_tool({"type": "object", "$schema": []})]},
        400,
        "tools.0",
    ),
    "schema_dialect_object": (
        CHAT,
        {"messages": USER, "tools": [_tool({"type": "object", "$schema": {"a": 1}})]},
        400,
        "tools.0",
    ),
    "remote_ref": (
        CHAT,
        {
            "messages": USER,
            "tools": [_tool({"type": "object", "properties": {"a": {"$ref": "http://169.254.169.254/latest"}}})],
        },
        400,
        "tools.0",
    ),
    "dangling_ref": (
        CHAT,
        {"messages": USER, "tools": [_tool({"type": "object", "properties": {"a": {"$ref": "#/nope"}}})]},
        400,
        "tools.0",
    ),
    "content_part_text_null": (
        CHAT,
        {"messages": [{"role": "user", "content": [{"type": "text", "text": None}]}]},
        400,
        "messages.0.content",
    ),
    "content_part_text_int": (
        CHAT,
        {"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]},
        400,
        "messages.0.content",
    ),
    "content_part_not_object": (CHAT, {"messages": [{"role": "user", "content": ["hi"]}]}, 400, "messages.0.content"),
    "content_object": (CHAT, {"messages": [{"role": "user", "content": {"a": 1}}]}, 400, "messages.0.content"),
    "history_call_function_string": (CHAT, {"messages": HISTORY_CALL}, 400, "messages.1.tool_calls.0.function"),
    "history_call_deep_arguments": (
        CHAT,
        {
            "messages": [
                USER[0],
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": _deep(100_000)}}
                    ],
                },
            ]
        },
        400,
        "messages.1.tool_calls.0.function.arguments",
    ),
    "history_call_huge_int_arguments": (
        CHAT,
        {
            "messages": [
                USER[0],
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "1" * 5000}}
                    ],
                },
            ]
        },
        400,
        "messages.1.tool_calls.0.function.arguments",
    ),
    "lookbehind_forced": (CHAT, {"messages": USER, "tools": [LOOKBEHIND], "tool_choice": FORCE_F}, 400, "tools.0"),
    "lookbehind_required": (
        CHAT,
        {"messages": USER, "tools": [WEATHER_TOOL, LOOKBEHIND], "tool_choice": "required"},
        400,
        "tools.1",
    ),
    "grammar_int_bound": (
        CHAT,
        {
            "messages": USER,
            "tools": [_tool({"type": "object", "properties": {"a": {"type": "integer", "minimum": 10**30}}})],
            "tool_choice": FORCE_F,
        },
        400,
        "tools.0",
    ),
    "stop_empty": (CHAT, {"messages": USER, "stop": [""]}, 400, "stop"),
    "stop_empty_string": (CHAT, {"messages": USER, "stop": ""}, 400, "stop"),
    "stop_too_many": (CHAT, {"messages": USER, "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    "stop_too_long": (CHAT, {"messages": USER, "stop": ["x" * 1000]}, 400, "stop"),
    "too_many_messages": (CHAT, {"messages": [{"role": "user", "content": "x"}] * 5000}, 400, "messages"),
    "too_many_parts": (
        CHAT,
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}] * 1000}]},
        400,
        "messages.0.content",
    ),
    "too_many_tools": (
        CHAT,
        {"messages": USER, "tools": [_tool({"type": "object"}, f"f{i}") for i in range(200)]},
        400,
        "tools",
    ),
    "tool_schema_too_big": (
        CHAT,
        {
            "messages": USER,
            "tools": [
                _tool(
                    {
                        "type": "object",
                        "properties": {f"p{i}": {"type": "string", "description": "d" * 100} for i in range(400)},
                    }
                )
            ],
        },
        400,
        "tools.0",
    ),
    "max_tokens_too_large": (CHAT, {"messages": USER, "max_tokens": 10**12}, 400, "max_tokens"),
    "top_logprobs_too_many": (CHAT, {"messages": USER, "logprobs": True, "top_logprobs": 21}, 400, "top_logprobs"),
    "top_logprobs_without_logprobs": (CHAT, {"messages": USER, "top_logprobs": 2}, 400, "top_logprobs"),
    "body_null": (CHAT, b"null", 400, None),
    "body_string": (CHAT, b'"hi"', 400, None),
    "agent_deep_nesting": (AGENT, b'{"task_id": "t", "messages": ' + _deep(100_000).encode() + b"}", 400, "messages"),
    "agent_huge_seed": (AGENT, {"task_id": "t", "messages": USER, "seed": 2**64}, 400, "seed"),
    "agent_tool_function_string": (
        AGENT,
        {"task_id": "t", "messages": USER, "tools": [{"type": "function", "function": "x"}]},
        400,
        "tools.0",
    ),
    "agent_tool_choice_function_string": (
        AGENT,
        {
            "task_id": "t",
            "messages": USER,
            "tools": [WEATHER_TOOL],
            "tool_choice": {"type": "function", "function": "x"},
        },
        400,
        "tool_choice",
    ),
    "agent_lookbehind_forced": (
        AGENT,
        {"task_id": "t", "messages": USER, "tools": [LOOKBEHIND], "tool_choice": FORCE_F},
        400,
        "tools.0",
    ),
    "agent_history_call_function_string": (
        AGENT,
        {"task_id": "t", "messages": HISTORY_CALL},
        400,
        "messages.1.tool_calls.0.function",
    ),
    "agent_too_many_messages": (
        AGENT,
        {"task_id": "t", "messages": [{"role": "user", "content": "x"}] * 5000},
        400,
        "messages",
    ),
    "agent_max_turns": (AGENT, {"task_id": "t", "messages": USER, "max_turns": 10_000}, 400, "max_turns"),
    "agent_max_tokens_too_large": (AGENT, {"task_id": "t", "messages": USER, "max_tokens": 10**12}, 400, "max_tokens"),
    # unknown top-level fields are refused by name (OpenAI: "Unrecognized request argument supplied")
    "unknown_field": (CHAT, {"messages": USER, "temprature": 0.5}, 400, "temprature"),
    "agent_unknown_field": (AGENT, {"task_id": "t", "messages": USER, "max_turn": 2}, 400, "max_turn"),
    "agent_chat_only_field": (AGENT, {"task_id": "t", "messages": USER, "logprobs": True}, 400, "logprobs"),
    "functions_unsupported": (CHAT, {"messages": USER, "functions": [{"name": "f"}]}, 400, "functions"),
    "response_format_json_schema": (
        CHAT,
        {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}},
        400,
        "response_format",
    ),
    "presence_penalty_out_of_range": (CHAT, {"messages": USER, "presence_penalty": 3}, 400, "presence_penalty"),
    "history_too_many_tool_calls": (
        CHAT,
        {
            "messages": [
                USER[0],
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                        for i in range(65)
                    ],
                },
            ]
        },
        400,
        "messages.1.tool_calls",
    ),
    "impossible_prompt": (
        CHAT,
        {"messages": [{"role": "user", "content": "word " * 190_000}]},
        400,
        "messages",
    ),
}

IGNORED_OPENAI_FIELDS = {
    "frequency_penalty": 0.5,
    "presence_penalty": -0.5,
    "logit_bias": {"50": -100},
    "user": "u-1",
    "metadata": {"k": "v"},
    "store": False,
    "service_tier": "auto",
    "parallel_tool_calls": True,
    "response_format": {"type": "text"},
    "prompt_cache_key": "k",
    "safety_identifier": "s",
    "reasoning_effort": "low",
    "verbosity": "low",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_body_gets_a_4xx_naming_the_field(hf_server, case):
    path, body, status, param = CASES[case]
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    started = time.monotonic()
    got, payload, _ = raw_post(hf_server.url + path, data)
    elapsed = time.monotonic() - started
    assert got == status, payload
    err = payload["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"] and "Traceback" not in err["message"]
    if param is not None:
        assert err["param"] is not None and err["param"].startswith(param), err
    assert elapsed < 5.0, f"{case} took {elapsed:.1f}s to reject"


def test_documented_openai_fields_are_accepted_and_ignored(hf_server):
    body = {"messages": USER, "max_tokens": 2, "stream": False, "n": 1, **IGNORED_OPENAI_FIELDS}
    status, payload, _ = raw_post(hf_server.url + CHAT, json.dumps(body).encode())
    assert status == 200, payload


def test_an_unknown_field_is_named_as_openai_names_it(hf_server):
    status, payload, _ = raw_post(hf_server.url + CHAT, json.dumps({"messages": USER, "foo": 1}).encode())
    assert status == 400 and payload["error"]["param"] == "foo" and payload["error"]["code"] == "unknown_field"
    assert payload["error"]["message"] == "Unrecognized request argument supplied: foo"


def test_an_impossible_prompt_is_refused_by_its_characters_before_templating(hf_server):
    """1024 tokens of context, no token of the tiny model's vocabulary over 81 characters: 950,000 characters are
    refused unrendered (the message counts characters, not tokens)."""
    _, body, _, _ = CASES["impossible_prompt"]
    status, payload, _ = raw_post(hf_server.url + CHAT, json.dumps(body).encode())
    assert status == 400 and payload["error"]["code"] == "context_length_exceeded"
    assert "950000 characters" in payload["error"]["message"], payload


@pytest.mark.timed
def test_many_messages_are_rejected_before_templating(hf_server):
    data = json.dumps({"messages": [{"role": "user", "content": "x"}] * 5000}).encode()
    started = time.monotonic()
    status, payload, _ = raw_post(hf_server.url + CHAT, data)
    assert status == 400 and payload["error"]["param"] == "messages"
    assert time.monotonic() - started < 1.0


def test_engine_still_serves_after_hostile_bodies(hf_server):
    for case in ("deep_nesting_100k", "lookbehind_forced", "stop_empty", "seed_2_64", "history_call_function_string"):
        path, body, _, _ = CASES[case]
        raw_post(hf_server.url + path, body if isinstance(body, bytes) else json.dumps(body).encode())
    body = {"messages": USER, "max_tokens": 4, "temperature": 1e-9, "seed": 2**63 - 1}  # tiny temperature: greedy
    status, payload, _ = raw_post(hf_server.url + CHAT, json.dumps(body).encode())
    assert status == 200, payload
    assert payload["choices"][0]["finish_reason"] in ("stop", "length")
    assert hf_server.get_json("/readyz")["engine"] is True


def test_tiny_temperature_is_greedy(hf_server):
    def completion(temperature, seed):
        body = {"messages": USER, "max_tokens": 6, "temperature": temperature, "seed": seed}
        status, payload, _ = raw_post(hf_server.url + CHAT, json.dumps(body).encode())
        assert status == 200, payload
        return payload["choices"][0]["message"]["content"]

    greedy = completion(0, 1)
    assert completion(1e-9, 2) == greedy and completion(1e-30, 3) == greedy


# --- top_logprobs --------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 5, 20])
def test_top_logprobs_has_k_sorted_entries(hf_server, k):
    body = {"messages": USER, "max_tokens": 6, "temperature": 0, "logprobs": True, "top_logprobs": k, "n": 2}
    status, payload, _ = raw_post(hf_server.url + CHAT, json.dumps(body).encode())
    assert status == 200, payload
    for choice in payload["choices"]:
        content = choice["logprobs"]["content"]
        assert len(content) == 6
        for entry in content:
            top = entry["top_logprobs"]
            assert len(top) == k
            values = [t["logprob"] for t in top]
            assert values == sorted(values, reverse=True) and all(v <= 0 for v in values)
            assert all(isinstance(t["token"], str) and t["bytes"] == list(t["token"].encode()) for t in top)
            # greedy: the sampled token is the most likely one, with the same logprob
            assert top[0]["token"] == entry["token"] and top[0]["logprob"] == pytest.approx(entry["logprob"], abs=1e-5)


def test_logprobs_without_top_logprobs_lists_none(hf_server):
    body = {"messages": USER, "max_tokens": 3, "logprobs": True, "top_logprobs": 0}
    status, payload, _ = raw_post(hf_server.url + CHAT, json.dumps(body).encode())
    assert status == 200 and all(e["top_logprobs"] == [] for e in payload["choices"][0]["logprobs"]["content"])


@pytest.mark.parametrize("tools", [False, True])
def test_streamed_logprobs_cover_every_token(hf_server, tools):
    body = {
        "messages": USER,
        "max_tokens": 8,
        "logprobs": True,
        "top_logprobs": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
        **({"tools": [WEATHER_TOOL]} if tools else {}),
    }
    req = urllib.request.Request(hf_server.url + CHAT, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        events = [json.loads(line[6:]) for line in r.read().decode().splitlines() if line.startswith("data: {")]
    entries = [e for ev in events for c in ev["choices"] if c["logprobs"] for e in c["logprobs"]["content"]]
    assert len(entries) == events[-1]["usage"]["completion_tokens"]
    assert all(len(e["top_logprobs"]) == 3 and e["logprob"] <= 0 for e in entries)


def test_top_logprobs_under_a_grammar_list_only_allowed_tokens(hf_server):
    body = {
        "messages": USER,
        "tools": [WEATHER_TOOL],
        "tool_choice": "required",
        "max_tokens": 40,
        "logprobs": True,
        "top_logprobs": 5,
        "seed": 3,
    }
    status, payload, _ = raw_post(hf_server.url + CHAT, json.dumps(body).encode())
    assert status == 200, payload
    content = payload["choices"][0]["logprobs"]["content"]
    assert content and all(1 <= len(e["top_logprobs"]) <= 5 for e in content)
    assert all(-1e9 < t["logprob"] <= 0 for e in content for t in e["top_logprobs"])  # no -Infinity (masked)


def test_vllm_top_logprobs_leave_out_the_sampled_token_unless_it_is_in_the_top_k():
    from collections import namedtuple

    from serve.engines.vllm_engine import _top

    lp = namedtuple("Logprob", "logprob rank")  # vllm.logprobs.Logprob's fields; the sampled token comes first
    assert _top({7: lp(-3.0, 5), 1: lp(-0.5, 1), 2: lp(-1.0, 2)}, 7, 2) == [(1, -0.5), (2, -1.0)]
    assert _top({2: lp(-1.0, 2), 1: lp(-0.5, 1)}, 2, 2) == [(1, -0.5), (2, -1.0)]
    assert _top({1: lp(-0.1, 1), 2: lp(float("-inf"), 2)}, 1, 2) == [(1, -0.1)]


# --- /healthz under the worst inputs -------------------------------------------------------------
def _worst_bodies() -> list[tuple[str, bytes]]:
    return [(case.path, case.body) for case in worst_bodies(WEATHER_TOOL)]


@pytest.mark.timed
def test_healthz_answers_within_100ms_while_the_worst_inputs_are_processed(hf_server):
    """Each of the worst bodies in turn (one request at a time), /healthz pinged all along."""
    bodies = _worst_bodies()
    # Warm up first: right after start-up the process still owes the full garbage collections of loading the
    # model (0.3-0.6 s each, every thread stopped); they are start-up's, not a request's (README "Request limits").
    for path, data in bodies:
        raw_post(hf_server.url + path, data)
    done = threading.Event()
    statuses: list[int] = []

    def one_at_a_time():  # once more after the warm-up: a few hundred pings
        for path, data in bodies:
            statuses.append(raw_post(hf_server.url + path, data)[0])
        done.set()

    worker = threading.Thread(target=one_at_a_time)
    conn = http.client.HTTPConnection("127.0.0.1", hf_server.port, timeout=10)
    conn.request("GET", "/healthz")
    conn.getresponse().read()  # connect first: only the server's answer time is measured
    pings: list[float] = []
    gc.disable()  # nor a collection pause of this (test) process
    try:
        worker.start()
        while not done.is_set() or len(pings) < 5:
            started = time.perf_counter()
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            pings.append(time.perf_counter() - started)
            done.wait(0.02)  # pace the pings; ends the loop as soon as the requests are answered
        worker.join()
    finally:
        gc.enable()
        conn.close()
    assert all(s < 500 for s in statuses), statuses
    assert len(pings) >= 5
    slow = sorted(pings)[-3:]
    # p99 under 100 ms is the promise (README "Request limits"); one ping in hundreds may meet a collection pause
    # of the server's own (one 107 ms of 655 on a busy 2-core machine), but never a request's worth of work
    p99 = sorted(pings)[min(len(pings) - 1, int(0.99 * len(pings)))]
    assert p99 < 0.1 and max(pings) < 0.25, (
        f"slowest /healthz pings: {[round(p * 1000) for p in slow]} ms of {len(pings)}"
    )


# --- units ---------------------------------------------------------------------------------------
def test_tool_metric_labels_are_the_registered_tools_whoever_calls_first():
    """The first caller after a start could take all 64 labels (first come, first kept): now only the names of the
    registered tools (the tool provider's) keep a label; any other offered name is 'other'."""
    from serve.metrics import ServeMetrics

    metrics = ServeMetrics(known_tools={"get_weather"})
    for i in range(100):  # one caller's fresh names, before anyone calls a registered tool
        name = f"tool{i}"
        metrics.tool_calls.labels(tool=ServeMetrics.known_tool(name, {name}), outcome="ok").inc()
    metrics.tool_calls.labels(tool=ServeMetrics.known_tool("get_weather", {"get_weather"}), outcome="ok").inc()
    metrics.tool_calls.labels(tool=ServeMetrics.known_tool("invented", set()), outcome="malformed").inc()
    labels = {
        s.labels["tool"]
        for m in metrics.registry.collect()
        if m.name == "slca_tool_calls"
        for s in m.samples
        if s.name == "slca_tool_calls_total"
    }
    assert labels == {"get_weather", "other", "unknown"}


class CountingTokenizer:
    """Wraps a tokenizer; counts the messages the chat template renders in total."""

    def __init__(self, tok):
        self.tok, self.rendered = tok, 0

    def apply_chat_template(self, messages, **kw):
        self.rendered += len(messages)
        return self.tok.apply_chat_template(messages, **kw)

    def __getattr__(self, name):
        return getattr(self.tok, name)


@pytest.mark.parametrize("k", [1, 2, 50, 200])
def test_prompt_chunks_render_linearly_and_reproduce_the_template(tiny_model_dir, k):
    from transformers import AutoTokenizer

    from serve.prompting import prompt_chunks, render

    tok = CountingTokenizer(AutoTokenizer.from_pretrained(tiny_model_dir))
    msgs = [{"role": ("user", "assistant")[i % 2], "content": f"m{i}"} for i in range(k)]
    chunks = prompt_chunks(tok, msgs)
    assert tok.rendered <= 6 * k + 2
    assert tok.decode([t for ids, _ in chunks for t in ids]) == render(tok.tok, msgs, True)
    assert len(chunks) == k + 1  # the template's default system text, then one chunk per message


def test_schema_validators_never_retrieve_refs(monkeypatch):
    from serve.requests import schema_validator

    def no_network(*a, **kw):
        raise AssertionError("a $ref was fetched")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    validator = schema_validator({"type": "object", "properties": {"a": {"$ref": "http://example.com/s.json"}}})
    with pytest.raises(Exception) as info:
        validator.validate({"a": 1})
    assert "fetched" not in str(info.value)


@pytest.mark.parametrize(
    "raw, param",
    [
        (b'{"a": {"b": ' + b"[" * 70 + b"]" * 70 + b"}}", "a"),
        (b'{"a": [1, 2, ' + b"1" * 400 + b"]}", "a.2"),
        (b'{"a": {"b": NaN}}', "a.b"),
        (b'{"a": "\\udc00"}', "a"),
    ],
)
def test_safe_json_names_the_offending_field(raw, param):
    from serve.errors import InvalidJSON
    from serve.http_util import JSONLimits, loads_checked

    with pytest.raises(InvalidJSON) as info:
        loads_checked(raw, JSONLimits(max_depth=64, max_number_chars=100))
    assert info.value.param == param


def test_safe_json_accepts_ordinary_bodies():
    from serve.http_util import JSONLimits, loads_checked

    body = {"messages": [{"role": "user", "content": 'é [{"]} \\ 😀'}], "x": [1.5, -2, 1e10, None, True]}
    assert loads_checked(json.dumps(body).encode(), JSONLimits()) == body
    assert loads_checked(json.dumps(body, ensure_ascii=False).encode(), JSONLimits()) == body
