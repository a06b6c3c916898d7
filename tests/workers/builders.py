"""Test trajectories with real token ids from the tiny model's tokenizer, so that segments are real spans, and
the tool-call records a server writes: every call of every turn as `parse_tool_calls` reads the turn's text."""

from __future__ import annotations

import json
from typing import Any

from slca.chat.hermes import function_of, parse_tool_calls
from slca.contracts import Segment, SegmentKind, ToolCallRecord, Trajectory

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather now",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                    "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Local time",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_forecast", "description": "Forecast",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                                      "metric": {"type": "boolean"}}, "required": ["city"]}}},
]  # fmt: skip


def call(name: str, **arguments: Any) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


class TrajectoryBuilder:
    """ChatML episode: system, user, then assistant turns of (kind, text) parts with tool results between."""

    def __init__(self, tokenizer):
        self.tok = tokenizer

    def _ids(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def build(self, turns: list[list[tuple[str, str]]], results: list[Any] | None = None, ground_truth=None,
              question: str = "What is the weather in Paris?", records: list[ToolCallRecord] | None = None,
              task_id: str = "task-0", traj_id: str | None = None, policy_version: int = 0) -> Trajectory:  # fmt: skip
        tokens, segments = [], []

        def add(kind: str, text: str, turn: int) -> None:
            ids = self._ids(text)
            if not ids:
                return
            segments.append(Segment(start=len(tokens), end=len(tokens) + len(ids), kind=SegmentKind(kind), turn=turn))
            tokens.extend(ids)

        add("system", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n", 0)
        add("user", f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n", 0)
        results = results or []
        messages = [{"role": "user", "content": question}]
        offered = {function_of(t)["name"] for t in TOOLS}
        parsed = []
        for turn, parts in enumerate(turns):
            for i, (kind, text) in enumerate(parts):
                add(kind, text + ("<|im_end|>" if i == len(parts) - 1 else ""), turn)
            messages.append({"role": "assistant", "content": "".join(t for _, t in parts)})
            parsed += [ToolCallRecord(turn=turn, block=c.block, name=c.name, arguments=c.arguments, valid=c.valid,
                                      raw=c.raw) for c in parse_tool_calls(messages[-1]["content"], offered)]  # fmt: skip
            if turn < len(turns) - 1:
                body = results[turn] if turn < len(results) else {"ok": True}
                text = json.dumps(body) if not isinstance(body, str) else body
                add("tool_result", f"\n<|im_start|>user\n<tool_response>\n{text}\n</tool_response><|im_end|>\n"
                                   "<|im_start|>assistant\n", turn)  # fmt: skip
                messages.append({"role": "tool", "content": text})
        logprobs = [None] * len(tokens)
        for seg in segments:
            if seg.kind.generated:
                logprobs[seg.start : seg.end] = [-0.1] * (seg.end - seg.start)
        extra = {"id": traj_id} if traj_id else {}
        return Trajectory(task_id=task_id, policy_version=policy_version, tools=TOOLS, messages=messages,
                          tokens=tokens, logprobs=logprobs, segments=segments,
                          tool_calls=parsed if records is None else records,
                          ground_truth=ground_truth, **extra)  # fmt: skip
