"""POST /v1/agent/runs — n rollouts of one task (one group), recorded to `slca:trajectories`."""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

from aiohttp import web

from serve.admission import ADMISSION, caller_of
from serve.agent import AgentRunner, EpisodeOutcome, EpisodeSpec
from serve.auth import record_refusal
from serve.engines.base import SamplingParams
from serve.errors import ServeError
from serve.http_util import check_model, json_response, off_loop, read_json, sse
from serve.keys import CHARS_PER_TOKEN, ENGINE, GRAMMARS, METRICS, RECORDER, REPLICA, SETTINGS, TOOLS
from serve.prompting import request_chunks
from serve.requests import (
    AgentRunRequest,
    check_context,
    check_tools,
    forced_call_grammar,
    max_tokens_of,
    parse_body,
    resolve_tool_choice,
    temperature_of,
)


def _spec(app: web.Application, data: Any) -> tuple[AgentRunRequest, EpisodeSpec]:
    """The validated request and its episode spec; CPU work (schemas, templating, tokenisation), run off the loop."""
    settings, engine = app[SETTINGS], app[ENGINE]
    req = parse_body(AgentRunRequest, data, settings, app.get(CHARS_PER_TOKEN))
    check_model(app, req.model)
    offered = check_tools(req.tools, settings)
    resolve_tool_choice(req.tool_choice, req.tools)  # an invalid choice is refused before templating
    messages = [m.model_dump(exclude_none=True) for m in req.messages]
    # rendered and tokenised once here: the n rollouts start from these chunks
    prompt = request_chunks(engine.tokenizer, messages, req.tools)
    max_tokens = max_tokens_of(req, settings)
    check_context(sum(len(ids) for ids, _ in prompt), max_tokens, settings)
    spec = EpisodeSpec(
        task_id=req.task_id,
        messages=messages,
        tools=req.tools,
        offered=offered,
        params=SamplingParams(temperature_of(req, settings), req.top_p, max_tokens),
        first_turn_grammar=None,  # built after this (`_force`): in the grammar builders, off the request pool
        max_turns=req.max_turns or settings.max_turns_default,
        max_model_len=settings.max_model_len,
        prompt=prompt,
        ground_truth=req.ground_truth,
    )
    return req, spec


async def _force(request: web.Request, req: AgentRunRequest, spec: EpisodeSpec) -> None:
    """The first turn's grammar when a call is forced (the builders are shared per caller, bounded in time)."""
    _, forced = resolve_tool_choice(req.tool_choice, req.tools)
    app = request.app
    built = await forced_call_grammar(app[GRAMMARS], caller_of(request), req.tools, forced, app[SETTINGS])
    spec.first_turn_grammar = built.ebnf if built is not None else None


def _run_json(outcome: EpisodeOutcome, with_trajectory: bool) -> dict[str, Any]:
    t = outcome.trajectory
    out = {
        "trajectory_id": t.id,
        "policy_version": t.policy_version,
        "mixed_version": t.mixed_version,
        "message": outcome.message,
        "tool_calls": outcome.tool_calls,
        "finish_reason": outcome.finish_reason,
    }
    if with_trajectory:
        out["trajectory"] = t.model_dump(mode="json")
    return out


async def agent_runs(request: web.Request) -> web.StreamResponse:
    app = request.app
    with app[ADMISSION].planning():  # a bounded queue in front of the request pool, checked before the body is read
        req, spec = await off_loop(app, _spec, app, await read_json(request))
        await _force(request, req, spec)
    with app[ADMISSION].admit(req.n):
        return await _run(request, req, spec)


async def _run(request: web.Request, req: AgentRunRequest, spec: EpisodeSpec) -> web.StreamResponse:
    app = request.app
    runner = AgentRunner(
        app[ENGINE], app[TOOLS], app[METRICS], app[SETTINGS].engine_timeout_s, replica=app[REPLICA].replica
    )
    seed = req.seed if req.seed is not None else random.getrandbits(31)
    # rollout seeds stay within 0..max_seed (the agent loop adds a small step per turn: torch takes < 2**64)
    seeds = [(seed + 1_000_003 * i) % (app[SETTINGS].max_seed + 1) for i in range(req.n)]
    run_id = f"run-{uuid.uuid4().hex}"
    spec.run_id = run_id
    # training data (and the ground_truth it is scored against) only from a key with the 'record' scope
    refused = record_refusal(request) if req.record else None
    said = {"record_refused": refused} if refused else {}

    async def one(i: int) -> dict[str, Any]:
        outcome = await runner.run(spec, seeds[i])
        recorded = False
        if req.record and not refused:
            recorded = await app[RECORDER].record(outcome.trajectory)  # never raises: back-pressure is counted
        return {**_run_json(outcome, req.return_trajectories), "recorded": recorded, **said}

    tasks = [asyncio.create_task(one(i)) for i in range(req.n)]
    if req.stream:
        return await _stream_runs(request, run_id, req.task_id, tasks)
    try:
        runs = await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
    return await json_response(app, {"id": run_id, "task_id": req.task_id, **said, "runs": runs})


async def _stream_runs(request: web.Request, run_id: str, task_id: str, tasks: list[asyncio.Task]):
    """Progress as server-sent events: one `run` event per finished rollout, then `done` with all of them."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    runs: list[dict[str, Any]] = []
    try:
        for finished in asyncio.as_completed(tasks):
            try:
                run = await finished
            except ServeError as exc:
                await response.write(sse({"event": "error", **exc.body()}))
                continue
            runs.append(run)
            await response.write(sse({"event": "run", "id": run_id, "run": run}))
        await response.write(sse({"event": "done", "id": run_id, "task_id": task_id, "runs": runs}))
        await response.write(b"data: [DONE]\n\n")
    finally:
        for t in tasks:
            t.cancel()
    return response
