"""Hermes tool-call parsing: one or several blocks, arrays, malformed calls flagged, reasoning ignored."""

import pytest

from slca.chat.hermes import parse_tool_calls, render_tool_calls, render_tools_system, text_outside_calls


def test_round_trip_render_parse():
    calls = [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "now", "arguments": {}}]
    parsed = parse_tool_calls(render_tool_calls(calls), offered={"add", "now"})
    assert [(c.name, c.arguments, c.valid, c.block) for c in parsed] == [
        ("add", {"a": 1, "b": 2}, True, 0),
        ("now", {}, True, 1),
    ]


def test_array_block_is_parallel():
    parsed = parse_tool_calls('<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]</tool_call>')
    assert [c.block for c in parsed] == [0, 0] and all(c.valid for c in parsed)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("<tool_call>{not json}</tool_call>", "not JSON"),
        ('<tool_call>"Paris"</tool_call>', "not a JSON object"),
        ('<tool_call>{"arguments": {}}</tool_call>', "missing function name"),
        ('<tool_call>{"name": "a", "arguments": "x"}</tool_call>', "arguments are not"),
        ('<tool_call>{"name": "zzz", "arguments": {}}</tool_call>', "unknown tool"),
        ('<tool_call>{"name": "a", "arguments": {}}', "unterminated"),
    ],
)
def test_malformed_calls_are_flagged_not_raised(text, reason):
    (call,) = parse_tool_calls(text, offered={"a"})
    assert not call.valid and reason in call.error


def test_calls_inside_reasoning_do_not_count():
    text = '<think>maybe <tool_call>{"name": "a", "arguments": {}}</tool_call></think>The answer is 4.'
    assert parse_tool_calls(text) == []
    assert text_outside_calls(text) == "The answer is 4."


def test_system_prompt_hides_extensions():
    tool = {"type": "function", "function": {"name": "a", "parameters": {}, "x-mode": "real"}}
    system = render_tools_system([tool], "Be brief.")
    assert system.startswith("Be brief.") and '"name": "a"' in system and "x-mode" not in system
