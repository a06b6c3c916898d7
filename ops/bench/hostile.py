"""Generators of hostile requests (the hardening round), shared by the tests (tests/serve/test_hardening.py,
test_hostile.py) and by `slca bench soak`.

`hostile_bodies()` yields `HostileCase`s: what to send and which statuses are acceptable. Every case must be
answered fast (the tests use `max_seconds`) and must leave the server serving. `worst_bodies()` are the costliest
bodies near the size limit that /healthz must stay fast under; some are legal (200, or 429 under load).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterator

CHAT, AGENT = "/v1/chat/completions", "/v1/agent/runs"
USER = [{"role": "user", "content": "hi"}]
JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class HostileCase:
    name: str
    path: str
    body: bytes
    statuses: tuple[int, ...]
    """Acceptable answers (each a 4xx: the request is refused, never a 500)."""
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON_HEADERS))
    max_seconds: float = 1.0


def escaped_quote_run(size: int, depth: int = 65, tail: bytes = b"") -> bytes:
    """`[`×depth, an opening quote, then `\\"` until `size` bytes, never closed: the text that made the JSON depth
    pre-scan quadratic (8 KB 0.18 s, 60 KB 10 s, 1 MiB about an hour)."""
    head = b"[" * depth + b'"'
    return head + b'\\"' * ((size - len(head) - len(tail)) // 2) + tail


def _json(value) -> bytes:
    return json.dumps(value).encode()


def _tool(parameters, name: str = "f") -> dict:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def costly_pattern(classes: int) -> str:
    """A case-insensitive pattern of full-range classes: `re` compiles each such class char by char (ms each)."""
    return "(?i)" + "[\x00-\uffff]" * classes


def hostile_bodies(body_limit: int = 1_048_576) -> Iterator[HostileCase]:
    quotes = escaped_quote_run(body_limit - 64)
    yield HostileCase("escaped_quote_run_1mib", CHAT, quotes, (400,))
    yield HostileCase("escaped_quote_run_lone_backslash", CHAT, escaped_quote_run(body_limit - 64, tail=b"\\"), (400,))
    args = escaped_quote_run(body_limit // 2 - 1024).decode()
    history = [
        USER[0],
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}],
        },
    ]
    yield HostileCase("escaped_quote_run_in_history_arguments", CHAT, _json({"messages": history}), (400, 413))
    yield HostileCase(
        "bearer_not_utf8",
        "/admin/weights",
        _json({"path": "/nonexistent", "version": 1}),
        (401,),
        headers={**JSON_HEADERS, "Authorization": "Bearer \xff"},
    )
    yield HostileCase(
        "text_plain_body",
        CHAT,
        _json({"messages": USER, "max_tokens": 1}),
        (415,),
        headers={"Content-Type": "text/plain"},
    )
    yield HostileCase("no_content_type", CHAT, _json({"messages": USER, "max_tokens": 1}), (415,), headers={})
    yield HostileCase(
        "foreign_origin",
        CHAT,
        _json({"messages": USER, "max_tokens": 1}),
        (403,),
        headers={**JSON_HEADERS, "Origin": "https://evil.example"},
    )
    slow = [
        _tool({"type": "object", "properties": {"a": {"type": "string", "pattern": costly_pattern(2000)}}}, f"f{i}")
        for i in range(4)
    ]
    yield HostileCase("costly_patterns", CHAT, _json({"messages": USER, "tools": slow}), (400,))
    many = {f"p{j}": {"type": "string", "pattern": costly_pattern(80)[:999]} for j in range(40)}
    yield HostileCase(
        "many_costly_patterns",
        CHAT,
        _json({"messages": USER, "tools": [_tool({"type": "object", "properties": many})]}),
        (400,),
    )
    yield HostileCase("task_id_too_long", AGENT, _json({"task_id": "t" * 201, "messages": USER}), (400,))
    yield HostileCase("task_id_glob", AGENT, _json({"task_id": "a*b\r\nFLUSHALL", "messages": USER}), (400,))
    nested = {"type": "string", "maxLength": 100_000}
    for _ in range(6):
        nested = {"type": "array", "items": nested, "minItems": 1000, "maxItems": 5000}
    yield HostileCase(
        "grammar_huge_bounds",
        CHAT,
        _json(
            {
                "messages": USER,
                "tools": [_tool({"type": "object", "properties": {"a": nested}, "required": ["a"]})],
                "tool_choice": "required",
                "max_tokens": 4,
            }
        ),
        (400,),
        max_seconds=5.0,
    )


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                "unit": {"type": "string", "enum": ["c", "f"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
"""A small tool for the forced-call case (the tests pass their own `WEATHER_TOOL`)."""


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def worst_bodies(forced_tool: dict = WEATHER) -> list[HostileCase]:
    """The costliest bodies near the 1 MB limit, one per kind of work: templating, counting, tool schemas,
    number scanning, the depth scan, a forced grammar; two as agent runs. None may take a 5xx or block the loop."""
    near_limit = 1_000_000
    long_text = {"messages": [{"role": "user", "content": "word " * (near_limit // 5 - 20)}]}
    many_small = {"messages": [{"role": "user" if i % 2 else "assistant", "content": "ab " * 200} for i in range(500)]}
    enums = {f"p{j}": {"type": "string", "enum": [f"v{k}" for k in range(60)]} for j in range(12)}
    many_tools = {
        "messages": USER,
        "tools": [_tool({"type": "object", "properties": enums}, f"t{i}") for i in range(128)],
        "tool_choice": "required",
        "max_tokens": 8,
    }
    numbers = b'{"messages": [{"role": "user", "content": "hi"}], "x": [' + b",".join([b"123456789"] * 99_000) + b"]}"
    deep = b'{"messages": ' + _deep(near_limit // 2 - 20).encode() + b"}"
    forced = {"messages": USER, "tools": [forced_tool], "tool_choice": "required", "max_tokens": 24}
    bodies = [
        ("worst_long_text", CHAT, _json(long_text)),
        ("worst_many_small_messages", CHAT, _json(many_small)),
        ("worst_many_tools_forced", CHAT, _json(many_tools)),
        ("worst_numbers", CHAT, numbers),
        ("worst_deep", CHAT, deep),
        ("worst_forced_call", CHAT, _json(forced)),
        ("worst_agent_long_text", AGENT, _json({**long_text, "task_id": "t"})),
        (
            "worst_agent_many_small_messages",
            AGENT,
            _json({**many_small, "task_id": "t", "max_tokens": 4, "record": False}),
        ),
    ]
    # legal or not depending on the model's context: any answer but a 5xx (429: admission, under load)
    return [HostileCase(name, path, body, (200, 400, 413, 429), max_seconds=60.0) for name, path, body in bodies]
