"""Grammars for forced tool calls, built on xgrammar (vLLM's own structured-output backend).

Named / required `tool_choice` is NOT taken from vLLM's tool_choice path (FINDINGS.md: it returned bare
strings as arguments with SmolLM2). Instead the completion is constrained to one Hermes block
`<tool_call>\n{"name": <fn>, "arguments": {...schema...}}\n</tool_call>` by a grammar that both engines
apply token by token: vLLM through `StructuredOutputsParams(grammar=...)`, hf through an xgrammar matcher.
"""

from __future__ import annotations

import json
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
    """EBNF for exactly one `<tool_call>` block calling one of `tools` with schema-valid arguments."""
    schemas = [call_schema(t) for t in tools]
    schema = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    return _grammar_text(json.dumps(schema))


class GrammarUnavailable(RuntimeError):
    """xgrammar (installed with vLLM) is missing, so calls cannot be forced."""


@lru_cache(maxsize=256)
def _grammar_text(schema_json: str) -> str:
    try:
        import xgrammar as xgr
    except ModuleNotFoundError:
        raise GrammarUnavailable("forced tool_choice needs the xgrammar package (installed with vllm)") from None

    grammar = xgr.Grammar.concat(
        xgr.Grammar.from_ebnf('root ::= "<tool_call>\\n"'),
        xgr.Grammar.from_json_schema(schema_json, any_whitespace=False),
        xgr.Grammar.from_ebnf('root ::= "\\n</tool_call>"'),
    )
    return str(grammar)
