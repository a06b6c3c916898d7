"""In-domain evaluation: the task pack's test split, each task one greedy agent run through serve's own agent loop
(`POST /v1/agent/runs` with temperature 0, the loop users get, tools answered by the sim), scored from the calls the
server recorded in the trajectory.

Metrics per task: name F1 (multiset F1 of called vs gold tool names), argument match (per gold call with
arguments, the share of its keys whose values the best same-name predicted call matches), success (every gold
call matched exactly once with all its arguments, no extra call and no malformed one; for no-tool tasks: no call
at all), tool turns (model turns that wrote a call). The matching is the scorers' own (`workers.scoring.match`,
DESIGN.md §4: loose value equality, greedy best match per gold call), so eval and the HierR reward agree on what a
match is.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

import aiohttp

from slca.config import Config
from slca.contracts import GoldCall, Task, ToolCallRecord, Trajectory
from workers.scoring.match import match_calls, name_f1


def _matches(predicted: list[dict], gold: list[GoldCall]):
    return match_calls(gold, [(c["name"], c.get("arguments") or {}) for c in predicted])


def argument_match(predicted: list[dict], gold: list[GoldCall]) -> float:
    """Mean, over gold calls with arguments, of the share of their keys whose values the matched call sets
    (`workers.scoring.match`, the scorers' matching: 0 for a gold call no predicted call matched)."""
    scored = [m for m in _matches(predicted, gold) if m.gold.arguments]
    if not scored:
        return 1.0
    return sum(m.value for m in scored if m.pred_index is not None) / len(scored)


def success(predicted: list[dict], gold: list[GoldCall], needs_tool: bool) -> bool:
    """Every gold call matched by one call with all its arguments, and no extra call (no call at all when the
    task needs no tool)."""
    if not needs_tool:
        return not predicted
    return len(predicted) == len(gold) and all(m.correct for m in _matches(predicted, gold))


def run_request(task: Task, max_tokens: int, max_turns: int) -> dict[str, Any]:
    """The agent-run request of one test task: one greedy rollout, not recorded (a test task is never training
    data), its trajectory returned (the calls the server parsed are scored from it)."""
    return {"task_id": task.task_id, "messages": task.messages, "tools": task.tools, "n": 1, "temperature": 0.0,
            "seed": 0, "max_tokens": max_tokens, "max_turns": max_turns, "record": False,
            "return_trajectories": True}  # fmt: skip


def score(task: Task, records: list[ToolCallRecord]) -> dict[str, Any]:
    """One task's metrics from the calls the server recorded in its trajectory (every call of every turn, in the
    order written, executed or not; malformed ones with `valid` False)."""
    gold = task.ground_truth
    calls = [{"name": r.name, "arguments": r.arguments} for r in records if r.valid]
    invalid = sum(1 for r in records if not r.valid)
    return {
        "task_id": task.task_id,
        "name_f1": name_f1([g.name for g in gold.calls], [c["name"] for c in calls]),
        "argument_match": argument_match(calls, gold.calls),
        "success": success(calls, gold.calls, gold.tool_needed) and invalid == 0,
        "tool_turns": len({r.turn for r in records}),
        "invalid_calls": invalid,
    }


class EvalRunError(RuntimeError):
    """The server refused or failed a test task's agent run; the message carries its error."""


async def run_tasks(base_url: str, token: str | None, tasks: list[Task], max_tokens: int, max_turns: int,
                    concurrency: int, on_done: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:  # fmt: skip
    """Every task as one agent run of the server at `base_url` (`concurrency` in flight: the engine batches
    them), scored; rows in the order of `tasks`."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be ≥ 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # the server bounds each engine wait (serve.engine_timeout_s); an episode is several of them
    async with aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=None)) as http:

        async def one(task: Task) -> dict[str, Any]:
            async with gate:
                async with http.post(f"{base_url}/v1/agent/runs", json=run_request(task, max_tokens, max_turns)) as r:
                    body = await r.json(content_type=None)
            if r.status != 200:
                message = body.get("error", {}).get("message") if isinstance(body, dict) else body
                raise EvalRunError(f"task {task.task_id}: the server answered {r.status}: {message}")
            row = score(task, Trajectory.model_validate(body["runs"][0]["trajectory"]).tool_calls)
            on_done()
            return row

        return list(await asyncio.gather(*(one(t) for t in tasks)))


def eval_indomain(config: Config, model_dir: Path, pack: str, limit: int, max_tokens: int, max_turns: int,
                  concurrency: int, engine: str = "hf", threads: int | None = None) -> dict[str, Any]:  # fmt: skip
    """The first `limit` test tasks of `pack`, run by an in-process server on `model_dir` (`ops.eval.server`)."""
    from tqdm import tqdm

    from ops.eval.server import eval_server
    from ops.feed.tasks import load_pack

    tasks = load_pack(pack, "test")[:limit]
    with eval_server(config, model_dir, engine, threads) as server:
        with tqdm(total=len(tasks), desc=f"in-domain {pack}", unit="task") as bar:
            rows = asyncio.run(run_tasks(server.url, server.admin_token, tasks, max_tokens, max_turns, concurrency,
                                         on_done=lambda: bar.update(1)))  # fmt: skip
    return {"pack": pack, "engine": engine, "summary": summarize(rows), "tasks": rows}


def summarize(rows: list[dict[str, Any]]) -> dict[str, float]:
    n = len(rows) or 1
    return {
        "n": len(rows),
        "name_f1": sum(r["name_f1"] for r in rows) / n,
        "argument_match": sum(r["argument_match"] for r in rows) / n,
        "success": sum(r["success"] for r in rows) / n,
        "tool_turns": sum(r["tool_turns"] for r in rows) / n,
    }
