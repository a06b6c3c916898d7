"""POST /v1/chat/completions — OpenAI-compatible, tools in the Hermes convention, optional SSE streaming."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import replace
from typing import Any

from aiohttp import web

from serve.admission import ADMISSION, caller_of
from serve.auth import record_refusal
from serve.engines.base import EngineError, GenerationResult, SamplingParams
from serve.detok import IncrementalText
from serve.errors import EngineUnavailable, ServeError
from serve.http_util import check_model, json_response, off_loop, read_json, sse
from serve.keys import CHARS_PER_TOKEN, ENGINE, GRAMMARS, METRICS, RECORDER, REPLICA, SETTINGS
from serve.prompting import request_chunks
from serve.requests import (
    ChatRequest,
    check_context,
    check_tools,
    forced_call_grammar,
    max_tokens_of,
    parse_body,
    resolve_tool_choice,
    stop_strings,
    temperature_of,
)
from serve.trajectory import TrajectoryBuilder
from serve.turns import Turn, call_record, decode_turn, end_ids, openai_tool_call, sample
from slca.chat.hermes import parse_tool_calls, text_outside_calls


class ChatPlan:
    """Everything derived from one request body: prompt, per-choice sampling params, tool mode. Built off the event
    loop (`off_loop`): validation, schema checks, templating and tokenisation are CPU work. A forced call's grammar
    is built after it (`force`), in the grammar builders, which the event loop only awaits."""

    def __init__(self, app: web.Application, data: Any):
        settings, engine = app[SETTINGS], app[ENGINE]
        req = parse_body(ChatRequest, data, settings, app.get(CHARS_PER_TOKEN))
        self.model = check_model(app, req.model)
        self.offered = check_tools(req.tools, settings)
        self.mode, forced = resolve_tool_choice(req.tool_choice, req.tools)
        self.stop = stop_strings(req.stop, settings)
        self.messages = [m.model_dump(exclude_none=True) for m in req.messages]
        self.chunks = request_chunks(engine.tokenizer, self.messages, req.tools)
        self.prompt_ids = [t for ids, _ in self.chunks for t in ids]
        max_tokens = max_tokens_of(req, settings)
        check_context(len(self.prompt_ids), max_tokens, settings)
        self.forced = forced
        seed = req.seed if req.seed is not None else random.getrandbits(31)
        top = (req.top_logprobs or 0) if req.logprobs else 0
        self.params = [
            SamplingParams(
                temperature_of(req, settings),
                req.top_p,
                max_tokens,
                (seed + i) % (settings.max_seed + 1),
                self.stop,
                None,
                top,
            )
            for i in range(req.n)
        ]
        self.req = req
        self.tools = req.tools or []

    async def force(self, request: web.Request) -> None:
        """Constrain every choice to one call of the forced tools (nothing when no call is forced)."""
        app = request.app
        built = await forced_call_grammar(app[GRAMMARS], caller_of(request), self.req.tools, self.forced, app[SETTINGS])
        if built is not None:
            self.params = [replace(p, grammar=built.ebnf) for p in self.params]

    def message(self, turn: Turn) -> tuple[dict[str, Any], str]:
        text = _cut_at_stop(turn.text, self.stop)
        if self.mode != "none":
            calls = [c for c in parse_tool_calls(text, self.offered) if c.valid]
            if calls:
                content = text_outside_calls(text) or None
                return {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [openai_tool_call(c) for c in calls],
                }, "tool_calls"
        return {"role": "assistant", "content": text}, turn.result.finish_reason


def _cut_at_stop(text: str, stop: list[str]) -> str:
    cuts = [text.index(s) for s in stop if s in text]
    return text[: min(cuts)] if cuts else text


def _logprobs(tokenizer, turns: list[Turn]) -> list[dict[str, Any]]:
    """OpenAI `logprobs` of each choice."""
    return [_logprob_content(tokenizer, t.result.token_ids, t.result.logprobs, t.result.top_logprobs) for t in turns]


def _logprob_content(tokenizer, ids: list[int], lps: list[float], tops: list | None) -> dict[str, Any]:
    """Every sampled token with its logprob and (top_logprobs) its most likely alternatives."""

    def entry(token: int, lp: float) -> dict[str, Any]:
        text = tokenizer.decode([token], skip_special_tokens=False)
        return {"token": text, "logprob": lp, "bytes": list(text.encode())}

    content = [{**entry(t, lp), "top_logprobs": []} for t, lp in zip(ids, lps)]
    for item, top in zip(content, tops or []):
        item["top_logprobs"] = [entry(t, lp) for t, lp in top]
    return {"content": content}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    admission = request.app[ADMISSION]
    with admission.planning():  # a bounded queue in front of the request pool, checked before the body is read
        plan = await off_loop(request.app, ChatPlan, request.app, await read_json(request))
        await plan.force(request)
    with admission.admit(len(plan.params)):
        return await _answer(request, plan)


async def _answer(request: web.Request, plan: ChatPlan) -> web.StreamResponse:
    req = plan.req
    if req.stream:
        return await _stream(request, plan)
    app, created = request.app, int(time.time())
    results = await asyncio.gather(*(_sample(request, plan, p) for p in plan.params))
    # decoding n long outputs (and tagging their segments) is CPU work of seconds: off the event loop
    turns, choices = await off_loop(app, _choices, app[ENGINE], plan, results)
    await _maybe_record(request, plan, turns)
    completion = sum(len(t.result.token_ids) for t in turns)
    return await json_response(
        app,
        {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": created,
            "model": plan.model,
            "choices": choices,
            "system_fingerprint": f"slca-v{max(t.result.policy_version for t in turns)}",
            "policy_version": max(t.result.policy_version for t in turns),
            "usage": {
                "prompt_tokens": len(plan.prompt_ids) * len(turns),
                "completion_tokens": completion,
                "total_tokens": len(plan.prompt_ids) * len(turns) + completion,
            },
        },
    )


def _choices(engine, plan: ChatPlan, results: list[GenerationResult]) -> tuple[list[Turn], list[dict[str, Any]]]:
    """The decoded turns and the OpenAI choices of a non-streamed request (run off the loop)."""
    turns = [decode_turn(engine, r) for r in results]
    logprobs = _logprobs(engine.tokenizer, turns) if plan.req.logprobs else [None] * len(turns)
    choices = []
    for i, turn in enumerate(turns):
        message, finish = plan.message(turn)
        choices.append({"index": i, "message": message, "finish_reason": finish, "logprobs": logprobs[i]})
    return turns, choices


async def _sample(request: web.Request, plan: ChatPlan, params: SamplingParams):
    app = request.app
    return await sample(app[ENGINE], app[METRICS], plan.prompt_ids, params, app[SETTINGS].engine_timeout_s)


async def _maybe_record(request: web.Request, plan: ChatPlan, turns: list[Turn]) -> None:
    """Record a configured share of live chat traffic as single-turn trajectories (one group per request)."""
    settings = request.app[SETTINGS]
    if settings.record_chat_share <= 0 or random.random() >= settings.record_chat_share:
        return
    if record_refusal(request):
        return  # only traffic sent with a 'record' key becomes training data (serve/auth.py)
    task_id = f"chat-{uuid.uuid4().hex}"
    for turn in turns[: max(1, settings.record_chat_n)]:
        builder = TrajectoryBuilder()
        for ids, kind in plan.chunks:
            builder.add_environment(ids, kind, 0)
        r = turn.result
        builder.add_generated(r.token_ids, r.logprobs, turn.kinds, 0, r.versions)
        message, _ = plan.message(turn)
        # the calls as written (valid or not) travel in the trajectory: the workers score them from these records
        calls = [call_record(c, 0) for c in parse_tool_calls(_cut_at_stop(turn.text, plan.stop), plan.offered)]
        traj = builder.build(
            task_id=task_id,
            tools=plan.tools,
            messages=plan.messages + [message],
            tool_calls=calls,
            ground_truth=None,
            meta={"source": "chat", "engine": request.app[ENGINE].name},
            fallback_version=request.app[ENGINE].version,
            group_key=task_id,
            replica=request.app[REPLICA].replica,
        )
        await request.app[RECORDER].record(traj)


# --- streaming ----------------------------------------------------------------------------------
async def _stream(request: web.Request, plan: ChatPlan) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    head = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": plan.model,
    }
    events: asyncio.Queue = asyncio.Queue()
    workers = [asyncio.create_task(_stream_choice(request, plan, i, p, events)) for i, p in enumerate(plan.params)]
    usage_tokens = 0
    try:
        for _ in workers:
            while (event := await events.get()) is not None:
                if isinstance(event, ServeError):
                    await response.write(sse(event.body()))
                    continue
                if isinstance(event, int):
                    usage_tokens += event
                    continue
                await response.write(sse({**head, "choices": [event]}))
        if (plan.req.stream_options or {}).get("include_usage"):
            prompt = len(plan.prompt_ids) * len(plan.params)
            usage = {"prompt_tokens": prompt, "completion_tokens": usage_tokens, "total_tokens": prompt + usage_tokens}
            await response.write(sse({**head, "choices": [], "usage": usage}))
        await response.write(b"data: [DONE]\n\n")
    finally:
        for w in workers:
            w.cancel()
    return response


def _delta(i: int, delta: dict[str, Any], finish: str | None = None, logprobs=None) -> dict[str, Any]:
    return {"index": i, "delta": delta, "finish_reason": finish, "logprobs": logprobs}


async def _stream_choice(request, plan: ChatPlan, i: int, params: SamplingParams, events: asyncio.Queue) -> None:
    """Emit one choice's deltas. Plain text streams as it is sampled; when tools may be called the turn is
    buffered (a `<tool_call>` cannot be told from prose until it closes) and then sent as tool-call deltas."""
    engine = request.app[ENGINE]
    try:
        await events.put(_delta(i, {"role": "assistant", "content": ""}))
        if plan.mode == "none":
            turn = await _stream_text(request, plan, i, params, events)
        else:
            turn = await off_loop(request.app, decode_turn, engine, await _sample(request, plan, params))
            message, finish = plan.message(turn)
            for delta in _message_deltas(message):
                await events.put(_delta(i, delta))
            logprobs = None
            if plan.req.logprobs:  # the buffered turn's logprobs, all at once with the finish delta
                logprobs = (await off_loop(request.app, _logprobs, engine.tokenizer, [turn]))[0]
            await events.put(_delta(i, {}, finish, logprobs))
        await events.put(len(turn.result.token_ids))
    except ServeError as exc:
        await events.put(exc)
    finally:
        await events.put(None)


async def _stream_text(request, plan: ChatPlan, i: int, params: SamplingParams, events: asyncio.Queue) -> Turn:
    """Stream the text as it is sampled, ending with the finish delta. With `logprobs`, each delta carries those
    of the tokens sampled since the previous one (the finish delta the rest). Linear in the output: each step
    decodes a short window (`IncrementalText`), never the whole output again."""
    engine, metrics = request.app[ENGINE], request.app[METRICS]
    ids, lps, tops, versions, finish = [], [], [], [], "length"
    text = IncrementalText(engine.tokenizer, end_ids(engine), plan.stop)
    reported = 0  # tokens whose logprobs were sent

    def logprobs_since():
        nonlocal reported
        if not plan.req.logprobs:
            return None
        chunk = _logprob_content(engine.tokenizer, ids[reported:], lps[reported:], tops[reported:])
        reported = len(ids)
        return chunk

    try:
        async with asyncio.timeout(request.app[SETTINGS].engine_timeout_s):  # as for non-streamed requests
            async for step in engine.stream(plan.prompt_ids, params):
                ids += step.token_ids
                lps += step.logprobs
                tops += step.top_logprobs or [[] for _ in step.token_ids]
                versions += [step.version] * len(step.token_ids)
                finish = step.finish_reason or finish
                if new := text.add(step.token_ids, final=step.finish_reason is not None):
                    await events.put(_delta(i, {"content": new}, logprobs=logprobs_since()))
    except (EngineError, TimeoutError) as exc:
        metrics.engine_failures.inc()
        raise EngineUnavailable(f"engine unavailable: {str(exc) or 'timed out'}") from None
    metrics.tokens_generated.inc(len(ids))
    await events.put(_delta(i, {}, finish, logprobs_since() if reported < len(ids) else None))
    return await off_loop(request.app, decode_turn, engine, GenerationResult(ids, lps, finish, versions))


def _message_deltas(message: dict[str, Any]) -> list[dict[str, Any]]:
    deltas = []
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for k, call in enumerate(message.get("tool_calls") or []):
        args = call["function"]["arguments"]
        half = len(args) // 2
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": k,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        for piece in (args[:half], args[half:]):
            if piece:
                deltas.append({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
    return deltas
