"""OpenAI-style messages → plain chat-template messages in the Hermes tool convention.

Shared by the API (serve), evaluation (ops) and anything else that must prompt exactly like the API: tool schemas
go into the system message (`<tools>`), assistant `tool_calls` become `<tool_call>` blocks, `tool` messages become
`<tool_response>` blocks, `developer` is a system message.
"""

from __future__ import annotations

import json
from typing import Any

from slca.chat.hermes import render_tool_calls, render_tool_response, render_tools_system


def content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return json.dumps(content, ensure_ascii=False)


def calls_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function", {})
        args = fn.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):  # JSONDecodeError, a >4,300-digit integer, deep nesting
                pass
        calls.append({"name": fn.get("name"), "arguments": args})
    return calls


def to_template_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for message in messages:
        role = "system" if message["role"] == "developer" else message["role"]
        text = content_text(message.get("content"))
        if role == "assistant" and message.get("tool_calls"):
            text = (text + "\n" if text else "") + render_tool_calls(calls_of(message))
        elif role == "tool":
            text = render_tool_response(text)
        out.append({"role": role, "content": text})
    if tools:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": render_tools_system(tools, out[0]["content"])}
        else:
            out.insert(0, {"role": "system", "content": render_tools_system(tools)})
    return out


def render_prompt(tokenizer, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The whole prompt text, generation prompt included, as the API renders it (`to_template_messages` through
    the model's chat template): the one renderer of serve, eval, the warm start and local rollouts."""
    return tokenizer.apply_chat_template(
        to_template_messages(messages, tools), tokenize=False, add_generation_prompt=True
    )


def prompt_ids(tokenizer, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    """Token ids of `render_prompt` (the template's text carries its special tokens: none are added)."""
    return tokenizer.encode(render_prompt(tokenizer, messages, tools), add_special_tokens=False)
