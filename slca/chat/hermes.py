"""The Hermes/Qwen tool convention, for models whose chat template has no tool section (SmolLM2's has none).

- tools: `<tools>` + one JSON schema per line + `</tools>` inside the system message;
- calls: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` in assistant turns (one or several
  blocks; a block may also hold a JSON array of calls);
- results: `<tool_response>...</tool_response>` in `tool` turns.
Parsing never raises: a malformed block is returned as a `ParsedCall` with `valid=False` and a reason,
because a malformed call is training signal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S)

SYSTEM_TOOLS_HEADER = (
    "You are a function-calling AI model. You are provided with function signatures within <tools></tools> "
    "XML tags. You may call one or more functions to assist with the user query. Don't make assumptions about "
    "what values to plug into functions. Here are the available tools:\n<tools>\n"
)
SYSTEM_TOOLS_FOOTER = (
    "\n</tools>\nFor each function call return a JSON object with the function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-dict>}\n'
    "</tool_call>\nWhen no function is needed, answer directly."
)


def function_of(tool: dict[str, Any]) -> dict[str, Any]:
    """The `function` object of an OpenAI tool definition (accepts the bare function object too)."""
    return tool.get("function", tool) if isinstance(tool, dict) else {}


def render_tools_system(tools: list[dict[str, Any]], system: str | None = None) -> str:
    """System message text carrying the tool schemas (x- extensions stripped: the model sees only the API)."""
    lines = []
    for tool in tools:
        fn = function_of(tool)
        clean = {k: v for k, v in fn.items() if not k.startswith("x-")}
        lines.append(json.dumps({"type": "function", "function": clean}, ensure_ascii=False))
    text = SYSTEM_TOOLS_HEADER + "\n".join(lines) + SYSTEM_TOOLS_FOOTER
    return f"{system}\n\n{text}" if system else text


def render_tool_calls(calls: list[dict[str, Any]]) -> str:
    """Assistant text for calls `[{"name", "arguments"}]`: one block per call."""
    blocks = (json.dumps({"name": c["name"], "arguments": c.get("arguments", {})}, ensure_ascii=False) for c in calls)
    return "\n".join(f"{TOOL_CALL_OPEN}\n{block}\n{TOOL_CALL_CLOSE}" for block in blocks)


def render_tool_response(content: Any) -> str:
    body = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return f"<tool_response>\n{body}\n</tool_response>"


@dataclass
class ParsedCall:
    name: str | None
    arguments: Any
    valid: bool
    raw: str
    block: int
    """Index of the `<tool_call>` block it came from (calls of one block are parallel)."""
    error: str | None = None


def strip_reasoning(text: str) -> str:
    """Text with `<think>` spans removed: calls written inside reasoning do not count."""
    return _THINK.sub("", text)


def parse_tool_calls(text: str, offered: set[str] | None = None) -> list[ParsedCall]:
    """Every call in `<tool_call>` blocks outside reasoning; invalid ones flagged with a reason."""
    calls: list[ParsedCall] = []
    for block, match in enumerate(_BLOCK.finditer(strip_reasoning(text))):
        raw = match.group(1).strip()
        if not match.group(0).endswith(TOOL_CALL_CLOSE):
            calls.append(ParsedCall(None, None, False, raw, block, "unterminated <tool_call> block"))
            continue
        try:
            payload = json.loads(raw)
        except json.JSONDecodeError as exc:
            calls.append(ParsedCall(None, None, False, raw, block, f"not JSON: {exc.msg}"))
            continue
        except (ValueError, RecursionError) as exc:  # a > 4,300-digit integer; nesting past the recursion limit
            calls.append(ParsedCall(None, None, False, raw, block, f"not usable JSON: {str(exc)[:100]}"))
            continue
        items = payload if isinstance(payload, list) else [payload]
        if not items:
            calls.append(ParsedCall(None, None, False, raw, block, "empty call list"))
        for item in items:
            calls.append(_check_call(item, raw, block, offered))
    return calls


def _check_call(item: Any, raw: str, block: int, offered: set[str] | None) -> ParsedCall:
    if not isinstance(item, dict):
        return ParsedCall(None, None, False, raw, block, "call is not a JSON object")
    name, args = item.get("name"), item.get("arguments", {})
    if isinstance(args, str):  # some models double-encode the arguments
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):  # not JSON, or JSON Python will not hold: stays a string (invalid)
            pass
    if not isinstance(name, str) or not name:
        return ParsedCall(None, args, False, raw, block, "missing function name")
    if not isinstance(args, dict):
        return ParsedCall(name, args, False, raw, block, "arguments are not a JSON object")
    if offered is not None and name not in offered:
        return ParsedCall(name, args, False, raw, block, f"unknown tool {name!r}")
    return ParsedCall(name, args, True, raw, block)


def text_outside_calls(text: str) -> str:
    """The prose of an assistant turn: reasoning and tool-call blocks removed."""
    return _BLOCK.sub("", strip_reasoning(text)).strip()
