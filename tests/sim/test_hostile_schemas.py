"""Caller-supplied schemas run bounded work: no `$ref` is fetched, catastrophic regexes and huge schemas end
within a bound in a structured error or a valid response, the event loop keeps running meanwhile, and the
caches of what SGLS derives from schemas are bounded in bytes."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest
from prometheus_client import CollectorRegistry

from sim import make_provider, schemas
from sim.bounds import DEFAULT_LIMITS, SchemaLimitError
from sim.lru import ByteLRU
from sim.patterns import generate, pattern_problem, search
from sim.schemas import is_valid, tool_spec, validation_error
from sim.settings import SimSettings
from sim.synth import synthesise

pytestmark = pytest.mark.timed  # stop deadlines and latency bounds: alone, in the serial phase

EVIL = "^(a+)+$"
EVIL_TEXT = "a" * 5000 + "!"


def _provider(**overrides):
    return make_provider(SimSettings(cache=False, real_packs=[], **overrides), None, CollectorRegistry())


def _tool(name: str, parameters: dict | None = None, response: dict | None = None) -> dict:
    fn: dict = {"name": name, "parameters": parameters or {"type": "object", "properties": {}}}
    if response is not None:
        fn["x-response-schema"] = response
    return {"type": "function", "function": fn}


def _call(tool: dict, arguments: dict, **settings):
    async def run():
        episode = await _provider(**settings).new_episode([tool])
        return await episode.call(tool["function"]["name"], arguments)

    start = time.monotonic()
    result = asyncio.run(run())
    return result, time.monotonic() - start


def _structured_error_or_valid(result, schema: dict) -> None:
    if result.ok:
        assert is_valid(schema, result.content), result.content
        assert len(json.dumps(result.content)) <= 2 * DEFAULT_LIMITS.max_output_bytes
    else:
        assert result.status in (400, 422) and result.error, result


class _CountingServer:
    """A TCP listener that counts connections: proof that nothing reached for the network."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def listener():
    server = _CountingServer()
    yield server
    server.close()


@pytest.mark.timeout(60)
def test_refs_are_never_fetched_and_give_a_structured_error(listener, tmp_path):
    secret = tmp_path / "schema.json"
    secret.write_text(json.dumps({"type": "integer"}))
    for ref in (f"http://127.0.0.1:{listener.port}/s.json", secret.as_uri(), "file:///etc/passwd"):
        schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
        # validating directly: an unresolvable reference, said so, not a request
        problem = validation_error(schema, {"a": "text"})
        assert problem is not None and "unresolvable $ref" in problem and "never fetched" in problem
        assert not is_valid(schema, {"a": "text"})
        # offered as a tool: refused at once, with a message
        with pytest.raises(ValueError, match="never fetched"):
            tool_spec(_tool("lookup", schema))
        result, _ = _call(_tool("lookup", schema), {"a": 1})
        assert result.status == 400 and "bad tool definition" in result.error and "never fetched" in result.error
        result, _ = _call(_tool("lookup", response={"$ref": ref}), {})
        assert result.status == 400 and "never fetched" in result.error
    assert listener.connections == 0


def test_a_ref_to_a_resource_embedded_in_the_schema_still_resolves():
    schema = {
        "$defs": {"n": {"$id": "https://example.com/n.json", "type": "integer"}},
        "type": "object",
        "properties": {"a": {"$ref": "https://example.com/n.json"}},
    }
    tool_spec(_tool("embedded", schema))
    assert validation_error(schema, {"a": 1}) is None
    assert "not of type 'integer'" in validation_error(schema, {"a": "x"})


@pytest.mark.timeout(60)
def test_catastrophic_pattern_in_arguments_is_a_structured_error_within_a_bound():
    tool = _tool("check_code", {"type": "object", "properties": {"code": {"type": "string", "pattern": EVIL}}})
    result, elapsed = _call(tool, {"code": EVIL_TEXT})
    assert elapsed < 5
    assert result.status == 400 and "could not be checked" in result.error and "pattern" in result.error
    result, _ = _call(tool, {"code": "aaaa"})
    assert result.ok


@pytest.mark.timeout(60)
def test_catastrophic_pattern_in_response_schema_gives_a_valid_response_within_a_bound():
    params = {"type": "object", "properties": {"code": {"type": "string"}}}
    response = {"type": "object", "properties": {"code": {"type": "string", "pattern": EVIL}}, "required": ["code"]}
    # the call's own "code" is overlaid onto the response, which is then checked against the evil pattern
    result, elapsed = _call(_tool("get_code", params, response), {"code": EVIL_TEXT})
    assert elapsed < 5
    assert result.ok and is_valid(response, result.content) and set(result.content["code"]) == {"a"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pattern", ["a{100000000}", "(a{1000}){1000}", "x" * 5000, "(unclosed"])
def test_patterns_too_large_to_compile_are_refused_with_a_message(pattern):
    response = {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}, "required": ["code"]}
    result, elapsed = _call(_tool("get_code", response=response), {})
    assert elapsed < 5
    assert result.status == 400 and "bad tool definition" in result.error and "pattern" in result.error


def _recursive(width: int) -> dict:
    node = {
        "type": "object",
        "properties": {f"p{i}": {"$ref": "#/$defs/n"} for i in range(width)},
        "required": [f"p{i}" for i in range(width)],
    }
    return {"$defs": {"n": node}, "$ref": "#/$defs/n"}


HUGE = {
    "min_items": {"type": "array", "minItems": 1_000_000, "items": {"type": "string"}},
    "min_length": {
        "type": "object",
        "properties": {"s": {"type": "string", "minLength": 10_000_000}},
        "required": ["s"],
    },
    "exponential_refs": _recursive(3),
    "wide": {
        "type": "object",
        "required": [f"k{i}" for i in range(2000)],
        "properties": {f"k{i}": {"type": "string"} for i in range(2000)},
    },
    "long_strings": {
        "type": "object",
        "required": [f"k{i}" for i in range(200)],
        "properties": {f"k{i}": {"type": "string", "minLength": 2000} for i in range(200)},
    },
    "nested_arrays": {
        "type": "array",
        "minItems": 50,
        "items": {"type": "array", "minItems": 50, "items": {"type": "array", "minItems": 50}},
    },
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(HUGE))
def test_huge_response_schemas_end_within_a_bound(name):
    result, elapsed = _call(_tool("get_thing", response=HUGE[name]), {})
    assert elapsed < 5
    _structured_error_or_valid(result, HUGE[name])


def test_synthesis_raises_a_limit_error_rather_than_building_a_huge_value():
    with pytest.raises(SchemaLimitError, match="bytes|items|characters|properties|deadline"):
        synthesise(HUGE["exponential_refs"], 1)
    small = synthesise(_recursive(1), 1)  # a chain: bounded by depth, fine
    assert isinstance(small, dict)


@pytest.mark.timeout(60)
def test_unique_items_over_many_objects_is_not_quadratic():
    schema = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}
    many = [{"i": i} for i in range(20_000)]
    start = time.monotonic()
    assert validation_error(schema, {"xs": many}) is None
    assert "non-unique" in validation_error(schema, {"xs": [*many, {"i": 5}]})
    assert not is_valid({"type": "array", "uniqueItems": True}, [1, 1.0])
    assert is_valid({"type": "array", "uniqueItems": True}, [1, True, "1"])
    assert time.monotonic() - start < 5


@pytest.mark.timeout(60)
def test_the_event_loop_keeps_running_while_a_call_works_on_a_slow_schema():
    width = 20  # every overlaid field hits a pattern timeout: ~1 s of work in all
    params = {"type": "object", "properties": {f"c{i}": {"type": "string"} for i in range(width)}}
    response = {
        "type": "object",
        "required": [f"c{i}" for i in range(width)],
        "properties": {f"c{i}": {"type": "string", "pattern": EVIL} for i in range(width)},
    }
    arguments = {f"c{i}": EVIL_TEXT for i in range(width)}

    async def run():
        episode = await _provider(schema_deadline_s=3.0).new_episode([_tool("get_codes", params, response)])
        done = asyncio.Event()
        gaps: list[float] = []

        async def ticker():
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        tick = asyncio.create_task(ticker())
        started = time.monotonic()
        result = await episode.call("get_codes", arguments)
        took = time.monotonic() - started
        done.set()
        await tick
        return result, took, max(gaps)

    result, took, worst_gap = asyncio.run(run())
    assert result.ok and is_valid(response, result.content)
    assert took > 0.3, "the schema was meant to cost time"
    assert worst_gap < took / 2, (worst_gap, took)


def test_patterns_generate_matching_strings_and_give_up_on_what_they_do_not_model():
    import random

    rng = random.Random(0)
    for pattern in (r"^[A-Z]{3}-\d{2,4}$", EVIL, r"(a|b)+\1", r"^\+1-\d{3}-\d{4}$", r"^[^@\s]+@[^@\s]+\.com$"):
        made = generate(pattern, rng, 100)
        assert made is not None and search(pattern, made), pattern
    assert generate(r"(?=x)y", rng, 100) is None
    assert pattern_problem("a{100000000}") and pattern_problem("(") and pattern_problem("a" * 2000)
    with pytest.raises(SchemaLimitError, match="longer than"):
        search(EVIL, EVIL_TEXT, timeout_s=0.02)


def test_response_schema_with_patterns_gets_matching_values():
    response = {
        "type": "object",
        "required": ["sku", "flight"],
        "properties": {
            "sku": {"type": "string", "pattern": "^[A-Z]{3}[0-9]{3}$"},
            "flight": {"type": "string", "pattern": "^[A-Z]{2}\\d{3,4}$", "maxLength": 6},
        },
    }
    for seed in range(20):
        value = synthesise(response, seed)
        assert is_valid(response, value), value
    assert synthesise(response, 3) == synthesise(response, 3)


def test_validator_cache_is_bounded_in_bytes(monkeypatch):
    monkeypatch.setattr(schemas, "_VALIDATORS", ByteLRU(max_bytes=8 << 20))
    blob = "x" * 100_000
    for i in range(40):  # each ~100 kB of JSON, charged ~1 MB: 40 MB offered to an 8 MB cache
        schema = {"type": "object", "description": f"{i}{blob}"}
        assert validation_error(schema, {}) is None
    assert schemas._VALIDATORS.bytes <= 8 << 20 and 0 < len(schemas._VALIDATORS) < 40
    # the production bound is in bytes, not entries
    assert schemas.VALIDATOR_CACHE_BYTES <= 128 << 20


def test_byte_lru_evicts_least_recently_used_and_skips_oversized_values():
    cache = ByteLRU(max_bytes=100)
    for key in "abc":
        cache.get_or_make(key, lambda k=key: k, lambda _v: 40)
    assert len(cache) == 2 and cache.bytes == 80  # "a" went first
    made = []
    cache.get_or_make("b", lambda: made.append(1), lambda _v: 40)
    assert not made  # a hit
    assert cache.get_or_make("big", lambda: "v", lambda _v: 1000) == "v" and "big" not in cache._items


def test_grammar_cache_is_bounded_in_bytes(tiny_model_dir):
    pytest.importorskip("xgrammar")
    from transformers import AutoTokenizer

    from sim.backends.guided import GrammarCache, bounded

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    cache = GrammarCache(tok, len(tok), [tok.eos_token_id], max_bytes=400_000)
    assert cache.compiler.cache_limit_bytes == 400_000  # xgrammar's own cache is bounded too
    for i in range(12):
        schema = {
            "type": "object",
            "required": [f"f{j}" for j in range(8)],
            "properties": {f"f{j}": {"type": "string", "enum": [f"v{i}-{j}-{k}" for k in range(20)]} for j in range(8)},
        }
        assert cache.matcher(schema) is not None
    assert 0 < cache._compiled.bytes <= 400_000 and len(cache._compiled) < 12
    # a pattern too large for a grammar is left to validate-and-retry
    assert "pattern" not in bounded({"type": "string", "pattern": "a{300}"})
    assert bounded({"type": "string", "pattern": "^[A-Z]{3}$"})["pattern"] == "^[A-Z]{3}$"
