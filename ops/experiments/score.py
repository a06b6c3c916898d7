"""`slca score`: the HierR reward of one answer to one task, for a person to see why it scores what it scores.

Reads one JSON object on stdin, `{"pack", "split", "task_id", "calls": [{"name", "arguments"}], "reply"}`, runs
the calls against the task's offered tools through the sim the way the agent loop does (`sim.provider`: real
tools for real, simulated ones by the deterministic schema backend, no injected fault; a call naming no offered
tool or with non-object arguments is answered with an error and recorded invalid), builds the `Trajectory` the
server would record (all calls in one model turn, then the reply in the next) and prints one JSON object: `exec`,
`pref`, `success`, every component, and the task's gold calls, facts and refusal flag for context.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from sim.provider import make_provider
from sim.settings import SimSettings
from sim.tasks import load_tasks
from sim.tasks.generate import run_sync
from slca.chat.hermes import parse_tool_calls, render_tool_calls
from slca.cli import CliError
from slca.contracts import Segment, SegmentKind, Task, ToolCallRecord, ToolResult, Trajectory
from workers.scoring import score_trajectory
from workers.settings import WorkerSettings


def parse_request(text: str) -> dict[str, Any]:
    """The request, checked: a clear one-line `CliError` for anything malformed."""
    try:
        req = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"score: stdin is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(req, dict):
        raise CliError("score: stdin must be one JSON object {pack, split, task_id, calls, reply}")
    unknown = set(req) - {"pack", "split", "task_id", "calls", "reply"}
    if unknown:
        raise CliError(f"score: unknown field(s) {', '.join(sorted(unknown))}")
    req = {"pack": "everyday", "split": "test", "calls": [], "reply": "", **req}
    for field in ("pack", "split", "task_id", "reply"):
        if not isinstance(req.get(field), str):
            raise CliError(f"score: '{field}' must be a string")
    if not isinstance(req["calls"], list):
        raise CliError("score: 'calls' must be a list of {name, arguments}")
    for i, c in enumerate(req["calls"]):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or set(c) - {"name", "arguments"}:
            raise CliError(f"score: calls[{i}] must be an object {{name: string, arguments: object}}")
        if not isinstance(c.get("arguments", {}), dict):
            raise CliError(f"score: calls[{i}].arguments must be an object")
    return req


def find_task(pack: str, split: str, task_id: str) -> Task:
    try:
        tasks = load_tasks(pack, split)
    except ValueError as exc:
        raise CliError(f"score: {exc}") from None
    for task in tasks:
        if task.task_id == task_id:
            return task
    raise CliError(f"score: no task {task_id!r} in the {pack} pack's {split} split")


async def _execute(task: Task, calls_text: str, sim: SimSettings) -> list[ToolCallRecord]:
    """The calls of one model turn as the server parses, executes and records them (serve/agent.py)."""
    offered = {t.get("function", t).get("name") for t in task.tools}
    provider = make_provider(sim)
    episode = await provider.new_episode(task.tools, f"score-{task.task_id}")
    records = []
    try:
        for call in parse_tool_calls(calls_text, offered):
            if call.valid:
                result = await episode.call(call.name, call.arguments)
            else:  # a malformed call is answered like an API would
                result = ToolResult(ok=False, status=400, error=call.error or "malformed tool call")
            records.append(
                ToolCallRecord(
                    turn=0,
                    block=call.block,
                    name=call.name,
                    arguments=call.arguments,
                    valid=call.valid,
                    raw=call.raw,
                    result=result.for_model(),
                    error=result.error,
                    latency_s=result.latency_s,
                )
            )
    finally:
        await episode.close()
        await provider.close()
    return records


def build_trajectory(task: Task, calls: list[dict[str, Any]], reply: str, sim: SimSettings) -> Trajectory:
    """The trajectory of an episode that wrote `calls` in its first model turn and then `reply`. Tokens are one
    placeholder per segment (scoring reads the records and messages, never the tokens)."""
    messages = [dict(m) for m in task.messages]
    records: list[ToolCallRecord] = []
    kinds = [SegmentKind.USER]
    if calls:
        text = render_tool_calls(calls)
        records = run_sync(_execute(task, text, sim))
        messages.append({"role": "assistant", "content": text})
        messages += [
            {"role": "tool", "name": r.name, "content": json.dumps(r.result, ensure_ascii=False)} for r in records
        ]
        kinds.append(SegmentKind.TOOL_CALL)
    messages.append({"role": "assistant", "content": reply})
    kinds.append(SegmentKind.SUMMARY)
    turn = {SegmentKind.USER: 0, SegmentKind.TOOL_CALL: 0, SegmentKind.SUMMARY: len(kinds) - 2}
    segments = [Segment(start=i, end=i + 1, kind=k, turn=turn[k]) for i, k in enumerate(kinds)]
    return Trajectory(
        task_id=task.task_id,
        policy_version=0,
        tools=task.tools,
        messages=messages,
        tokens=[0] * len(kinds),
        logprobs=[0.0 if k.generated else None for k in kinds],
        segments=segments,
        tool_calls=records,
        ground_truth=task.ground_truth,
        meta={"source": "slca score"},
    )


def score_request(req: dict[str, Any], workers: WorkerSettings, sim: SimSettings | None = None) -> dict[str, Any]:
    """The scored answer of a checked request (`parse_request`)."""
    task = find_task(req["pack"], req["split"], req["task_id"])
    # reproducible: no injected fault, the deterministic simulator, no cache (the tasks' own gold results)
    sim = (sim or SimSettings()).model_copy(
        update={"backend": "schema", "fault_rate": 0.0, "fault_rates": {}, "tool_fault_rates": {}, "cache": False}
    )
    traj = build_trajectory(task, req["calls"], req["reply"], sim)
    reward = score_trajectory(traj, workers)
    gt = task.ground_truth
    return {
        "task_id": task.task_id,
        "exec": reward.exec,
        "pref": reward.pref,
        "success": reward.components.get("success"),
        "omission_penalized": reward.omission_penalized,
        "components": reward.components,
        "calls": [r.model_dump(include={"name", "arguments", "valid", "result", "error"}) for r in traj.tool_calls],
        "gold": {
            "calls": [c.model_dump() for c in gt.calls] if gt else [],
            "facts": gt.facts if gt else [],
            "refusal": gt.refusal if gt else False,
            "needs_tool": gt.tool_needed if gt else None,
        },
    }


def run_score(args, config) -> int:
    req = parse_request(sys.stdin.read())
    out = score_request(req, config.get(WorkerSettings), config.get(SimSettings))
    print(json.dumps(out, ensure_ascii=False, indent=getattr(args, "indent", None)))
    return 0
