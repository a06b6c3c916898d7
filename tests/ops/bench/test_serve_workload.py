"""`slca bench serve`'s windows and workload (issue 40): tool-calling prompts of an agent's size on both servers, the
defaults (2-minute windows, 6 pairs, 1/16/64 clients), and the claim read from the lowest pair."""

from __future__ import annotations

import argparse
import json

import pytest

from ops.bench.ab import ABResult, Window
from ops.bench.serve import prompts
from ops.bench.serve.load import AGENT, CHAT, Workload, request_body
from ops.bench.serve.report import Comparison, Figures, claim, write


def test_tool_prompts_carry_the_schemas_and_a_multi_turn_history_on_both_apis():
    chat = request_body(CHAT, 2, 64, "m", stream=False, workload=Workload("tools"))
    agent = request_body(AGENT, 2, 64, "m", stream=False, workload=Workload("tools", agent_turns=3))
    system = chat["messages"][0]["content"]
    assert chat["messages"][0]["role"] == "system" and "<tools>" in system and "tools" not in chat
    assert all(json.dumps(t) in system for t in prompts.TOOLS)  # the schemas, as the chat template writes them
    assert len(system) > 2500  # ≈ 700 tokens: a tool-calling prompt, not a ten-token question
    assert [m["role"] for m in chat["messages"][1:]] == ["user", "assistant", "user", "assistant", "user"]
    assert "<tool_call>" in chat["messages"][2]["content"] and "<tool_response>" in chat["messages"][3]["content"]
    assert agent["tools"] == prompts.TOOLS and agent["max_turns"] == 3 and agent["record"] is True
    assert agent["messages"][0]["content"] == prompts.SYSTEM and agent["messages"][1:] == chat["messages"][1:]
    assert request_body(CHAT, 10, 64, "m", workload=Workload("tools"))["messages"] == prompts.chat_messages(2)


def test_short_prompts_stay_as_they_were_and_an_unknown_workload_is_refused():
    body = request_body(AGENT, 1, 8, None, stream=False)
    assert body["messages"] == [{"role": "user", "content": "How do tides work?"}] and body["max_turns"] == 1
    assert "tools" not in body
    with pytest.raises(ValueError, match="prompts"):
        request_body(CHAT, 1, 8, None, workload=Workload("long"))


def test_serve_bench_defaults_are_two_minute_windows_six_pairs_tool_prompts_and_three_client_levels():
    from ops.bench.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["serve"])
    assert (args.window_s, args.pairs, args.clients, args.prompts, args.agent_turns) == (
        120.0,
        6,
        [1, 16, 64],
        "tools",
        3,
    )
    assert parser.parse_args(["sft"]).pairs == 3  # the other benches keep the method's minimum


def row(ratios: list[float]) -> Comparison:
    windows = []
    for i, r in enumerate(ratios):
        windows += [Window(i, 0, "a", 100.0, None, None, None, {}), Window(i, 1, "b", 100.0 * r, None, None, None, {})]
    result = ABResult("a", "b", len(ratios), "alternate", None, [["A", "B"]] * len(ratios), 1, windows, {}, {})
    figures = Figures("x", CHAT, 16, 1, 0, 1, 1.0, 1.0, 1.0, None, None, None, None)
    return Comparison("slca-vllm-inproc", "chat-stream", 16, figures, figures, result)


FASTER = "≥ 1.040× the baseline's tokens/s in all 6 pairs (faster than the baseline in every pair, by ≥ 4.0%)"
SLOWER = "≥ 0.995× the baseline's tokens/s in all 6 pairs (NOT faster in every pair: the lowest pair is 0.5% slower)"


@pytest.mark.parametrize(
    "ratios, expect", [([1.04, 1.16, 1.10, 1.08, 1.12, 1.05], FASTER), ([1.01, 1.04, 0.995, 1.03, 1.02, 1.02], SLOWER)]
)
def test_the_claim_is_the_lowest_pairs_not_the_medians(ratios, expect):
    line = claim(row(ratios))
    assert line == f"slca-vllm-inproc chat-stream, 16 client(s): {expect}"


def test_written_results_carry_each_rows_claim(tmp_path):
    write(tmp_path, [row([1.2, 1.1, 1.3])], {"command": "slca bench serve", "model": "m"}, [])
    data = json.loads((tmp_path / "results.json").read_text())
    assert "≥ 1.100×" in data["rows"][0]["claim"]
    table = (tmp_path / "table.md").read_text()
    assert "What the lowest pair supports" in table and "≥ 1.100×" in table
