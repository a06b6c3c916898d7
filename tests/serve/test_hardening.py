"""The hardening round: linear body scans, keys that are not UTF-8, browser-reachable requests, bounded schema and
grammar work, admission, cancellation on hang-up, an event loop that keeps answering while long outputs decode."""

from __future__ import annotations

import json
import time

import pytest
from tests.serve.hostile_cases import AGENT, CHAT, USER, escaped_quote_run, hostile_bodies


# --- 1. the JSON depth pre-scan is linear --------------------------------------------------------
@pytest.mark.parametrize("tail", [b"", b"\\"])
def test_depth_scan_of_a_1mib_escaped_quote_run_is_fast(tail):
    from serve.errors import InvalidJSON
    from serve.http_util import JSONLimits, loads_checked

    raw = escaped_quote_run(1_048_576, tail=tail)
    started = time.perf_counter()
    with pytest.raises(InvalidJSON):
        loads_checked(raw, JSONLimits())
    assert time.perf_counter() - started < 1.0


def test_depth_scan_of_escaped_quotes_in_history_arguments_is_fast():
    from serve.errors import BadRequest
    from serve.requests import ChatRequest, parse_body
    from serve.settings import ServeSettings

    args = escaped_quote_run(512 * 1024).decode()
    body = {"messages": [USER[0], {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}]}]}  # fmt: skip
    started = time.perf_counter()
    with pytest.raises(BadRequest) as info:
        parse_body(ChatRequest, body, ServeSettings())
    assert time.perf_counter() - started < 1.0
    assert info.value.param == "messages.1.tool_calls.0.function.arguments"


@pytest.mark.parametrize("raw, deep", [
    (b'{"a": "\\"[[[[[[", "b": 1}', False),
    (b'{"a": "\\\\", "b": ' + b"[" * 70 + b"]" * 70 + b"}", True),  # an escaped backslash closes nothing
    (b'{"k\\"ey": "x", "b": ' + b"[" * 70 + b"]" * 70 + b"}", True),
])  # fmt: skip
def test_depth_scan_still_sees_strings_and_escapes(raw, deep):
    from serve.errors import UnsafeJSON
    from serve.http_util import JSONLimits, loads_checked

    if deep:
        with pytest.raises(UnsafeJSON) as info:
            loads_checked(raw, JSONLimits(max_depth=64))
        assert info.value.param == "b"
    else:
        assert loads_checked(raw, JSONLimits(max_depth=4)) == json.loads(raw)


# --- 2. a key that is not UTF-8 ------------------------------------------------------------------
def test_a_key_that_is_not_utf8_is_unknown_not_an_error():
    from slca.config import CommonSettings

    from serve.auth import granted

    common = CommonSettings(admin_token="secret", api_keys={"k1": ["serve"]})
    assert granted(common, "\udcff") is None  # how aiohttp hands over `Bearer \xff`
    assert granted(common, "\ud800x") is None
    assert granted(common, "secret") == frozenset({"serve", "record", "admin"})


# --- every hostile case against the shared server ------------------------------------------------
@pytest.mark.parametrize("case", [c.name for c in hostile_bodies()])
def test_hostile_case_is_refused_fast(hf_server, case):
    import http.client

    c = next(c for c in hostile_bodies() if c.name == case)
    conn = http.client.HTTPConnection("127.0.0.1", hf_server.port, timeout=120)
    started = time.monotonic()
    conn.request("POST", c.path, c.body, c.headers)
    response = conn.getresponse()
    payload = json.loads(response.read())
    elapsed = time.monotonic() - started
    conn.close()
    assert response.status in c.statuses, payload
    assert set(payload["error"]) == {"message", "type", "param", "code"}
    assert elapsed < c.max_seconds, f"{case} took {elapsed:.2f}s"


# --- 11. browser-reachable requests --------------------------------------------------------------
@pytest.mark.parametrize("origin, host, allowed, refused", [
    (None, "127.0.0.1:8000", [], False),
    ("http://127.0.0.1:8000", "127.0.0.1:8000", [], False),
    ("http://localhost:8000", "localhost:8000", [], False),
    ("http://[::1]:8000", "[::1]:8000", [], False),
    ("https://evil.example", "127.0.0.1:8000", [], True),
    ("http://rebound.example:8000", "rebound.example:8000", [], True),  # DNS rebinding: same origin, foreign name
    ("https://app.example", "127.0.0.1:8000", ["https://app.example"], False),
    ("null", "127.0.0.1:8000", [], True),
    ("http://127.0.0.1:99999999", "127.0.0.1:99999999", [], False),
    ("http://[bad", "127.0.0.1", [], True),
])  # fmt: skip
def test_origin_refusal(origin, host, allowed, refused):
    from serve.origin import origin_refusal

    assert (origin_refusal(origin, host, allowed) is not None) == refused


# --- 4. caller patterns are bounded and never compiled by the request check ----------------------
def _pattern_tools(pattern: str, count: int = 1) -> list[dict]:
    return [{"type": "function", "function": {"name": f"f{i}", "parameters": {"type": "object", "properties": {
        "a": {"type": "string", "pattern": pattern}}}}} for i in range(count)]  # fmt: skip


def test_a_costly_pattern_within_the_length_limit_is_checked_without_compiling():
    from tests.serve.hostile_cases import costly_pattern

    from serve.requests import check_tools
    from serve.settings import ServeSettings

    pattern = costly_pattern(199)  # 999 characters; `re.compile` takes seconds
    started = time.perf_counter()
    assert check_tools(_pattern_tools(pattern, 4), ServeSettings()) == {"f0", "f1", "f2", "f3"}
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("tools, words", [
    (_pattern_tools("a" * 1001), "1001 characters exceeds the limit of 1000"),
    (_pattern_tools("a" * 1000, 17), "exceed 16000 characters together"),
    (_pattern_tools("(", 1), "is not a 'regex'"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "patternProperties": {
        "b" * 1001: {"type": "string"}}}}}], "exceeds the limit of 1000"),
])  # fmt: skip
def test_patterns_over_the_limits_are_refused_with_a_clear_message(tools, words):
    from serve.errors import InvalidToolSchema
    from serve.requests import check_tools
    from serve.settings import ServeSettings

    with pytest.raises(InvalidToolSchema) as info:
        check_tools(tools, ServeSettings())
    assert words in info.value.message and info.value.param.startswith("tools.")
