"""The one factory of test trajectories, `trajectory()`, and what it is built with.

Three ways to call it, one function:

- a layout `[(kind, n_tokens), ...]` (the default: one user token, one summary token): arbitrary token ids,
  segments exactly as laid out, the turn increasing after each tool_result (what estimator, loss and recorder
  tests need);
- turns `[[(kind, text), ...], ...]` with a `tokenizer` (or through the `builder` fixture, a `TrajectoryBuilder`):
  a ChatML episode with the tiny model's real token ids, so that segments are real spans — system, user
  `question`, the assistant turns, each tool result from `results` between turns — with the messages and the
  tool-call records a server writes (every call of every turn as `parse_tool_calls` reads the turn's text);
- `template=`: a copy of a trajectory with the given fields replaced (a group member of another task, id or
  version); `member=i` names it the i-th member of its task's group (id `{task_id}-r{i}`).

Generated tokens (tool_call, summary, reasoning) carry the behaviour logprob `logprob`, the others `None`; any
`Trajectory` field may be passed and wins over what the factory computed (`tokens=`, `logprobs=`, `id=`, `meta=`…).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from slca.chat.hermes import function_of, parse_tool_calls
from slca.contracts import GoldCall, GroundTruth, Segment, SegmentKind, ToolCallRecord, Trajectory

K = SegmentKind
QUESTION = "What is the weather in Paris?"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather now",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Local time",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_forecast",
            "description": "Forecast",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}},
                "required": ["city"],
            },
        },
    },
]
_LAYOUT = ((K.USER, 1), (K.SUMMARY, 1))


def call(name: str, **arguments: Any) -> str:
    """The Hermes text of one tool call."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def trajectory(
    parts: Sequence = _LAYOUT,
    results: Sequence[Any] | None = None,
    ground_truth: GroundTruth | None = None,
    *,
    tokenizer=None,
    question: str = QUESTION,
    tool_calls: Sequence[ToolCallRecord] | None = None,
    template: Trajectory | None = None,
    member: int | None = None,
    logprob: float = -0.5,
    **fields: Any,
) -> Trajectory:
    """A contract-valid `Trajectory`: from a layout, from chat turns (with `tokenizer`), or from a `template`.

    `results` (one tool result per turn boundary, `{"ok": true}` when missing) and `question` apply to chat
    turns; `tool_calls` replaces the records (chat turns: parsed from the text; a layout: none)."""
    if member is not None:
        fields.setdefault("id", f"{fields.get('task_id') or (template.task_id if template else 'task')}-r{member}")
    if template is not None:
        assert parts is _LAYOUT and results is None, "a template is copied, not laid out again"
        update = {
            **fields,
            **({"ground_truth": ground_truth} if ground_truth is not None else {}),
            **({"tool_calls": list(tool_calls)} if tool_calls is not None else {}),
        }
        return template.model_copy(update=update)
    if tokenizer is not None:
        built = _chat(tokenizer, parts, results or [], question)
    else:
        assert results is None, "tool results need chat turns and a tokenizer"
        built = _layout(parts)
    spans, computed = built
    tokens, segments = [], []
    for kind, ids, turn in spans:
        segments.append(Segment(start=len(tokens), end=len(tokens) + len(ids), kind=kind, turn=turn))
        tokens += ids
    logprobs = [logprob if seg.kind.generated else None for seg in segments for _ in range(seg.end - seg.start)]
    if tool_calls is not None:
        computed["tool_calls"] = list(tool_calls)
    values = {
        "task_id": "task",
        "policy_version": 0,
        "tokens": tokens,
        "logprobs": logprobs,
        "segments": segments,
        "ground_truth": ground_truth,
        **computed,
        **fields,
    }
    return Trajectory(**values)


def _layout(spec) -> tuple[list, dict]:
    spans, turn, pos = [], 0, 0
    for kind, n in spec:
        spans.append((K(kind), [7 + pos + k for k in range(n)], turn))
        pos += n
        if K(kind) == K.TOOL_RESULT:
            turn += 1
    return spans, {}


def _chat(tokenizer, turns, results, question) -> tuple[list, dict]:
    spans = []

    def add(kind: str, text: str, turn: int) -> None:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if ids:
            spans.append((K(kind), ids, turn))

    add("system", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n", 0)
    add("user", f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n", 0)
    messages = [{"role": "user", "content": question}]
    offered = {function_of(t)["name"] for t in TOOLS}
    records = []
    for turn, parts in enumerate(turns):
        for i, (kind, text) in enumerate(parts):
            add(kind, text + ("<|im_end|>" if i == len(parts) - 1 else ""), turn)
        messages.append({"role": "assistant", "content": "".join(t for _, t in parts)})
        records += [
            ToolCallRecord(turn=turn, block=c.block, name=c.name, arguments=c.arguments, valid=c.valid, raw=c.raw)
            for c in parse_tool_calls(messages[-1]["content"], offered)
        ]
        if turn < len(turns) - 1:
            body = results[turn] if turn < len(results) else {"ok": True}
            text = json.dumps(body) if not isinstance(body, str) else body
            add(
                "tool_result",
                f"\n<|im_start|>user\n<tool_response>\n{text}\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
                turn,
            )
            messages.append({"role": "tool", "content": text})
    return spans, {"task_id": "task-0", "tools": TOOLS, "messages": messages, "tool_calls": records}


class TrajectoryBuilder:
    """`trajectory()` from chat turns with a tokenizer bound: what the `builder` fixture is.
    `builder.build(turns, results, ground_truth, question=…, tool_calls=…, task_id=…, id=…)`."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def build(
        self,
        turns: list[list[tuple[str, str]]],
        results: Sequence[Any] | None = None,
        ground_truth: GroundTruth | None = None,
        **kwargs: Any,
    ) -> Trajectory:
        return trajectory(turns, results, ground_truth, tokenizer=self.tokenizer, **kwargs)


def episodes(builder: TrajectoryBuilder) -> dict[str, Trajectory]:
    """Four episodes of the weather question (gold: get_weather(city=Paris), fact "18"), worst to best:
    `none` (no call), `wrong` (a wrong argument), `good` (the right call), `two` (the right calls in two turns)."""
    gt = GroundTruth(calls=[GoldCall(name="get_weather", arguments={"city": "Paris"})], facts=["18"])
    return {
        "none": builder.build([[("summary", "I think it is sunny.")]], [], gt),
        "wrong": builder.build(
            [[("tool_call", call("get_weather", city="Rome"))], [("summary", "It is 20 degrees.")]], [{"temp": 20}], gt
        ),
        "good": builder.build(
            [[("tool_call", call("get_weather", city="Paris"))], [("summary", "It is 18 degrees.")]], [{"temp": 18}], gt
        ),
        "two": builder.build(
            [
                [("tool_call", call("get_weather", city="Paris"))],
                [("tool_call", call("get_time", city="Paris"))],
                [("summary", "It is 18 degrees in Paris.")],
            ],
            [{"temp": 18}, {"time": "14:00"}],
            gt,
        ),
    }
