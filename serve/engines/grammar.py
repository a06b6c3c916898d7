"""Grammars for forced tool calls, built on xgrammar (vLLM's own structured-output backend).

Named / required `tool_choice` is NOT taken from vLLM's tool_choice path (FINDINGS.md: it returned bare
strings as arguments with SmolLM2). Instead the completion is constrained to one Hermes block
`<tool_call>\n{"name": <fn>, "arguments": {...schema...}}\n</tool_call>` by a grammar that both engines
apply token by token: vLLM through `StructuredOutputsParams(grammar=...)`, hf through an xgrammar matcher.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from slca.chat.hermes import function_of


def call_schema(tool: dict[str, Any]) -> dict[str, Any]:
    fn = function_of(tool)
    params = fn.get("parameters") or {"type": "object", "properties": {}}
    return {
        "type": "object",
        "properties": {"name": {"const": fn["name"]}, "arguments": params},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def tool_call_grammar(tools: list[dict[str, Any]]) -> str:
    """EBNF for exactly one `<tool_call>` block calling one of `tools` with schema-valid arguments.
    SchemaNotSupported names the tool whose schema xgrammar cannot compile (a lookbehind `pattern`, a bound
    beyond int64, a `$ref` that does not resolve...)."""
    schemas = [call_schema(t) for t in tools]
    if len(schemas) == 1:
        try:
            return _grammar_text(json.dumps(schemas[0]))
        except SchemaNotSupported as exc:
            raise SchemaNotSupported(0, exc.reason) from None
    try:
        return _grammar_text(json.dumps({"anyOf": schemas}))
    except SchemaNotSupported as exc:
        failed = exc
    for i, one in enumerate(schemas):  # which tool? (the error path only)
        try:
            _grammar_text(json.dumps(one))
        except SchemaNotSupported as exc:
            raise SchemaNotSupported(i, exc.reason) from None
    raise failed


class GrammarUnavailable(RuntimeError):
    """xgrammar (installed with vLLM) is missing, so calls cannot be forced."""


class SchemaNotSupported(ValueError):
    """xgrammar cannot turn the schema of `tools[index]` (None: of the tools together) into a grammar."""

    def __init__(self, index: int | None, reason: str):
        super().__init__(reason)
        self.index, self.reason = index, reason


def _reason(exc: BaseException) -> str:
    """xgrammar's message without its log prefix (`[12:00:00] /project/cpp/x.cc:83: `), one line, bounded."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    text = re.sub(r"^\[[^\]]*\]\s*\S+:\d+:\s*", "", text)
    text = re.sub(r"^Check failed: \(.*?\) is false:\s*", "", text)
    return text[:300]


@lru_cache(maxsize=32)  # keys are whole schemas (up to a request body each): keep few
def _grammar_text(schema_json: str) -> str:
    try:
        import xgrammar as xgr
    except ModuleNotFoundError:
        raise GrammarUnavailable("forced tool_choice needs the xgrammar package (installed with vllm)") from None

    try:
        grammar = xgr.Grammar.concat(
            xgr.Grammar.from_ebnf('root ::= "<tool_call>\\n"'),
            xgr.Grammar.from_json_schema(schema_json, any_whitespace=False),
            xgr.Grammar.from_ebnf('root ::= "\\n</tool_call>"'),
        )
    except (RuntimeError, ValueError, TypeError) as exc:  # xgrammar's C++ checks surface as RuntimeError
        raise SchemaNotSupported(None, _reason(exc)) from None
    return str(grammar)
