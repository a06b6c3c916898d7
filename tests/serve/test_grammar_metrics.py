"""`slca_grammar_builds_total` (serve/metrics.py) through the real HTTP server: forced tool calls' grammar builds
counted by how they ended — built, taken from the cache, refused — every series there from the start at 0 (a fixed
label set: nothing a caller sends adds one). The other outcomes (too costly, timed out, no builder place, cancelled,
unavailable): tests/serve/engines/test_grammar_builder.py."""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from ops.bench.hostile import CHAT, USER
from serve.engines.grammar_builder import KINDS, OUTCOMES

SMALL_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}}},
    },
}
LOOKBEHIND = {  # a pattern xgrammar cannot compile: the caller's schema is at fault
    "type": "function",
    "function": {
        "name": "f",
        "parameters": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=x)y"}}},
    },
}


def _builds(page: str) -> dict[tuple[str, str], float]:
    (family,) = [f for f in text_string_to_metric_families(page) if f.name == "slca_grammar_builds"]
    return {(s.labels["kind"], s.labels["outcome"]): s.value for s in family.samples if s.name.endswith("_total")}


def test_forced_call_grammar_builds_are_counted_by_outcome(tiny_model_dir, serve_redis):
    from tests.support.serve import run_in_app

    from serve.keys import GRAMMARS

    async def scenario(client, app):
        before = _builds(await (await client.get("/metrics")).text())
        await app[GRAMMARS].ready()  # the host imports xgrammar once (a minute on a loaded machine)
        forced = {"messages": USER, "tools": [SMALL_TOOL], "tool_choice": "required", "max_tokens": 48}
        statuses = [(await client.post(CHAT, json=forced)).status for _ in range(2)]
        bad = {"messages": USER, "tools": [LOOKBEHIND], "tool_choice": "required", "max_tokens": 8}
        statuses.append((await client.post(CHAT, json=bad)).status)
        return before, statuses, _builds(await (await client.get("/metrics")).text())

    before, statuses, after = asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario))
    assert statuses == [200, 200, 400]
    assert set(before) == {(k, o) for k in KINDS for o in OUTCOMES} and not any(before.values())
    assert after[("schema", "built")] == 1  # the first forced call builds ...
    assert after[("schema", "cached")] == 1  # ... the second finds it built
    assert after[("schema", "schema_refused")] == 1
    assert sum(after[("schema", o)] for o in OUTCOMES) == 3
