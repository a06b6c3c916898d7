"""Generators of hostile requests (the hardening round), shared by the tests (tests/serve/test_hardening.py,
test_hostile.py) and by `slca bench soak`.

`hostile_bodies()` yields `HostileCase`s: what to send and which statuses are acceptable. Every case must be
answered fast (the tests use `max_seconds`) and must leave the server serving. `worst_bodies()` are the costliest
bodies near the size limit that /healthz must stay fast under; some are legal (200, or 429 under load). The
builders at the end are the requests of the soak's cases (ops/bench/soak/cases.py: impossible prompts, costly
grammars, a million empty arrays, unknown fields, a trickled body, a foreign Host, a huge weight version), which
tests/serve/test_admission.py and test_hardening.py send too.
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


# --- the requests of the soak's cases (ops/bench/soak/cases.py), also sent by tests/serve -------------------------
FOREIGN_HOST = "attacker.example:8000"
"""A Host header no server allows: what a page on a name DNS rebinding points at the API would send."""
READ_ONLY_PATHS = ("/metrics", "/readyz")
"""Read-only endpoints that must refuse a foreign Host (421)."""


def impossible_prompt(chars: int = 900_000) -> dict:
    """A chat whose one message can never fit a context: `chars` characters, refused by their count before
    templating (a token is never longer than the vocabulary's longest)."""
    return {"messages": [{"role": "user", "content": "x" * chars}], "max_tokens": 2}


def nested_repeats_tool() -> dict:
    """Nested repeats, each bound within the limits and the schema 2 KB: xgrammar unrolls every distinct one
    (8 of them took 13 s and 32 MB on a loaded 2-core machine), far past any time bound."""
    props = {
        f"a{i}": {"type": "string", "pattern": f"^(([{chr(97 + i)}-z0-9]{{0,250}}){{0,250}}){{0,250}}$"}
        for i in range(24)
    }
    return _tool({"type": "object", "properties": props}, "costly")


def large_enum_tool(properties: int = 3, values: int = 60) -> dict:
    """Large enums under repeats (arrays of up to 256 of them): they grow the compiled grammar. The defaults keep
    the templated tool (≈ 1,400 tokens) within a 2,048-token context, or it is refused for its length, unbuilt."""
    enum = {"type": "array", "maxItems": 256, "items": {"type": "string", "enum": [f"v{k:04d}" for k in range(values)]}}
    return _tool({"type": "object", "properties": {f"p{j}": enum for j in range(properties)}}, "enums")


def forced_call(tool: dict, max_tokens: int = 8) -> dict:
    """A chat that must call `tool` (tool_choice required): its grammar is built before any token."""
    return {"messages": USER, "tools": [tool], "tool_choice": "required", "max_tokens": max_tokens}


def empty_arrays_body(size: int = 1_000_000) -> bytes:
    """A legal chat of about `size` bytes whose ignored field (`response_format`, checked only for its type) holds
    a third of `size` empty arrays: each one an object once parsed (≈ 25 MB for 1 MB)."""
    head = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "response_format": {"type": "text", '
    count = (size - len(head) - 10) // 3
    return head + b'"x": [' + b",".join([b"[]"] * count) + b"]}}"


def unknown_field_body(path: str = AGENT, size: int = 900_000) -> bytes:
    """An agent run (or a chat) carrying an unknown top-level field of `size` characters (OpenAI refuses an
    unrecognised argument: so must this server, before any work on the rest)."""
    run = {"task_id": "t", "record": False} if path == AGENT else {}
    return _json({**run, "messages": USER, "max_tokens": 2, "notes": "n" * size})


def post_head(path: str, length: int, host: str = "127.0.0.1") -> bytes:
    """The request line and headers of a JSON POST of `length` bytes: a raw client sends its body after them, as
    slowly as it likes."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def huge_version_path(digits: int = 5000) -> str:
    """A weight-server path whose version has `digits` digits (`int()` refuses past 4,300: a traceback once)."""
    return "/v" + "9" * digits + "/manifest.json"
