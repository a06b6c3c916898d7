"""Demonstrations for the warm start: a task's gold conversation, executed for real against a provider.

Returns OpenAI messages: user → assistant (`<tool_call>` text, one turn per gold step, parallel calls in
one turn) → tool results → final assistant answer stating the key facts (a task that no offered tool can
serve: no call, a plain reply saying so). The system message with the tools is the consumer's to render.
Calls run through `provider` (real or schema tools), so the results shown are the ones a served episode
would see.
"""

from __future__ import annotations

import inspect
import json
from itertools import groupby
from typing import Any

from slca.chat.hermes import render_tool_calls
from slca.contracts import Task, ToolProvider


async def ademonstration(task: Task, provider: ToolProvider) -> list[dict[str, Any]]:
    messages = [dict(m) for m in task.messages if m.get("role") != "system"]
    episode = await provider.new_episode(task.tools, f"demo-{task.task_id}")
    results: list[Any] = []
    try:
        for _, step_calls in groupby(sorted(task.ground_truth.calls, key=lambda c: c.step), key=lambda c: c.step):
            calls = [{"name": c.name, "arguments": c.arguments} for c in step_calls]
            messages.append({"role": "assistant", "content": render_tool_calls(calls)})
            for call in calls:
                result = await episode.call(call["name"], call["arguments"])
                results.append(result.for_model())
                messages.append(
                    {
                        "role": "tool",
                        "name": call["name"],
                        "content": json.dumps(result.for_model(), ensure_ascii=False),
                    }
                )
    finally:
        await episode.close()
    messages.append({"role": "assistant", "content": _final_answer(task, results)})
    return messages


def _final_answer(task: Task, results: list[Any]) -> str:
    """The intent's answer, given as many of (facts, results, query, offered tool names) as it takes."""
    from sim.tasks.generate import intent_of

    answer = intent_of(task).answer
    query = next((m["content"] for m in task.messages if m.get("role") == "user"), "")
    tools = [t.get("function", t).get("name", "") for t in task.tools]
    args = (task.ground_truth.facts, results, query, tools)
    return answer(*args[: max(2, min(len(args), len(inspect.signature(answer).parameters)))])


def demonstration(task: Task, provider: ToolProvider) -> list[dict[str, Any]]:
    """Sync wrapper of `ademonstration` (safe to call inside a running event loop: it uses a thread then)."""
    from sim.tasks.generate import run_sync

    return run_sync(ademonstration(task, provider))
