"""Forced tool calls through the vLLM engine are served and bounded: the grammar host builds the call's grammar
within `serve.grammar_compile_timeout_s` (serve/engines/grammar_builder.py), vLLM then compiles the grammar text
whose build was bounded, for its own structured-output backend. A forced call naming a function is answered with
schema-valid arguments; one whose schema is too costly is refused (422) within the bound, never reaching vLLM,
while another caller's chat is served meanwhile; `slca_grammar_builds_total` counts both (vLLM asks the builder
for no compiled grammar: it compiles the text itself)."""

from __future__ import annotations

import asyncio
import json
import time

import jsonschema
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ops.bench.hostile import CHAT, USER
from tests.support.serve import WEATHER_TOOL

pytestmark = pytest.mark.slow

BOUND_S = 5.0


def _costly_tool() -> dict:
    """Nested repeats, each bound within the schema limits: xgrammar unrolls every distinct one, far past the
    bound (the costly tool of tests/serve/test_hardening.py)."""
    props = {
        f"a{i}": {"type": "string", "pattern": f"^(([{chr(97 + i)}-z0-9]{{0,250}}){{0,250}}){{0,250}}$"}
        for i in range(24)
    }
    return {"type": "function", "function": {"name": "costly", "parameters": {"type": "object", "properties": props}}}


def _builds(page: str) -> dict[tuple[str, str], float]:
    (family,) = [f for f in text_string_to_metric_families(page) if f.name == "slca_grammar_builds"]
    return {(s.labels["kind"], s.labels["outcome"]): s.value for s in family.samples if s.name.endswith("_total")}


def test_forced_calls_through_vllm_are_served_and_bounded(tiny_model_dir, serve_redis):
    from tests.support.serve import run_in_app

    from serve.keys import GRAMMARS
    from serve.settings import ServeSettings

    settings = ServeSettings(  # the costly tool's schema templates to ~1,300 tokens
        engine="vllm", max_model_len=2048, kv_cache_gib=1, grammar_compile_timeout_s=BOUND_S
    )
    other = {"Authorization": "Bearer other-caller"}

    async def scenario(client, app):
        await app[GRAMMARS].ready()  # the host imports xgrammar once (a minute on a loaded machine)
        named = {"type": "function", "function": {"name": "get_weather"}}
        forced = {"messages": USER, "tools": [WEATHER_TOOL], "tool_choice": named, "max_tokens": 96, "seed": 1}
        answer = await client.post(CHAT, json=forced)
        answered = (answer.status, await answer.json())
        costly = {"messages": USER, "tools": [_costly_tool()], "tool_choice": "required", "max_tokens": 8}
        started = time.monotonic()
        refused = asyncio.create_task(client.post(CHAT, json=costly))
        while not app[GRAMMARS]._places.held:  # the costly build holds a builder
            assert not refused.done(), await (await refused).text()
            await asyncio.sleep(0.01)
        chat = await client.post(CHAT, json={"messages": USER, "max_tokens": 4}, headers=other)
        served_before_refusal = not refused.done()
        refusal = await refused
        elapsed = time.monotonic() - started
        page = await (await client.get("/metrics")).text()
        return answered, chat.status, served_before_refusal, refusal.status, await refusal.json(), elapsed, page

    answered, chat, before, status, body, elapsed, page = asyncio.run(
        run_in_app(tiny_model_dir, serve_redis.url, scenario, settings, api_keys={"other-caller": ["serve"]})
    )
    answer_status, answer = answered
    assert answer_status == 200 and answer["choices"][0]["finish_reason"] == "tool_calls", answer
    (call,) = answer["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    jsonschema.validate(json.loads(call["function"]["arguments"]), WEATHER_TOOL["function"]["parameters"])
    assert chat == 200 and before, "the other caller's chat waited for the costly build"
    assert status == 422 and body["error"]["code"] == "grammar_too_costly", body
    assert elapsed < 2 * BOUND_S + 10  # a wait for a builder and a build, each bounded, and the answer
    builds = _builds(page)
    assert builds[("schema", "built")] == 1
    assert builds[("schema", "timed_out")] + builds[("schema", "too_costly")] == 1  # whichever bound came first
    assert not any(v for (kind, _), v in builds.items() if kind == "ebnf")  # vLLM compiles the text itself
