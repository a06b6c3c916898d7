"""The tool-call grammar (serve/engines/grammar.py): bounded schemas are refused before compiling, local $defs keep
resolving. (Moved from tests/serve/test_hardening.py, item 8 of the hardening round.)"""

from __future__ import annotations

import time

import pytest

PYDANTIC_STYLE = {
    "type": "function",
    "function": {
        "name": "convert",
        "parameters": {
            "$defs": {
                "Unit": {"enum": ["kelvinish", "celsiusish"], "type": "string"},
                "Reading": {"type": "object", "properties": {"unit": {"$ref": "#/$defs/Unit"}}, "required": ["unit"]},
            },
            "type": "object",
            "properties": {"reading": {"$ref": "#/$defs/Reading"}, "again": {"$ref": "#/properties/reading"}},
            "required": ["reading"],
        },
    },
}


@pytest.mark.parametrize("others", [0, 1])
def test_forced_tool_with_local_defs_gets_a_grammar_that_resolves_them(others):
    from serve.engines.grammar import forced_schemas
    from serve.engines.grammar_host import grammar_text  # what the grammar host's builds run

    tools = [{"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}] * others
    grammar = grammar_text(forced_schemas(tools + [PYDANTIC_STYLE]))
    assert "kelvinish" in grammar and "celsiusish" in grammar


@pytest.mark.parametrize(
    "schema, words",
    [
        ({"type": "string", "maxLength": 5000}, "maxLength=5000 exceeds the limit of 256"),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 1000}, "minItems=1000"),
        (
            {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(3000)}},
            "more than 2048 objects",
        ),
    ],
)
@pytest.mark.timed
def test_schemas_past_the_grammar_limits_are_refused_before_compiling(schema, words):
    from serve.engines.grammar import SchemaNotSupported, forced_schemas

    tool = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": schema}}},
    }
    started = time.perf_counter()
    with pytest.raises(SchemaNotSupported) as info:
        forced_schemas([tool])
    assert words in info.value.reason and info.value.index == 0
    assert time.perf_counter() - started < 0.5
