"""POST /v1/chat/completions — OpenAI-compatible, tools in the Hermes convention, optional SSE streaming."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from typing import Any

from aiohttp import web

from serve.auth import record_refusal
from serve.engines.base import EngineError, GenerationResult, SamplingParams
from serve.errors import BadRequest, ContextTooLong, EngineUnavailable, ServeError
from serve.http_util import check_model, read_json, sse
from serve.keys import ENGINE, METRICS, RECORDER, SETTINGS
from serve.prompting import prompt_chunks, to_template_messages
from serve.requests import ChatRequest, check_tools, forced_call_grammar, parse_body, resolve_tool_choice
from serve.trajectory import TrajectoryBuilder
from serve.turns import Turn, decode_turn, end_ids, openai_tool_call, sample
from slca.chat.hermes import parse_tool_calls, text_outside_calls


class ChatPlan:
    """Everything derived from one validated request: prompt, per-choice sampling params, tool mode."""

    def __init__(self, request: web.Request, req: ChatRequest):
        settings, engine = request.app[SETTINGS], request.app[ENGINE]
        self.model = check_model(request, req.model)
        self.offered = check_tools(req.tools)
        self.mode, forced = resolve_tool_choice(req.tool_choice, req.tools)
        if req.n > settings.max_n:
            raise BadRequest(f"n={req.n} exceeds the limit of {settings.max_n}", param="n")
        self.messages = [m.model_dump(exclude_none=True) for m in req.messages]
        self.chunks = prompt_chunks(engine.tokenizer, to_template_messages(self.messages, req.tools))
        self.prompt_ids = [t for ids, _ in self.chunks for t in ids]
        max_tokens = req.max_completion_tokens or req.max_tokens or settings.max_tokens_default
        if len(self.prompt_ids) + max_tokens > settings.max_model_len:
            raise ContextTooLong(
                f"This model's maximum context length is {settings.max_model_len} tokens; the request has "
                f"{len(self.prompt_ids)} prompt tokens and asks for {max_tokens} more",
                param="messages",
            )
        self.stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
        grammar = forced_call_grammar(forced)
        seed = req.seed if req.seed is not None else random.getrandbits(31)
        self.params = [
            SamplingParams(req.temperature, req.top_p, max_tokens, seed + i, self.stop, grammar) for i in range(req.n)
        ]
        self.req = req
        self.tools = req.tools or []

    def message(self, turn: Turn) -> tuple[dict[str, Any], str]:
        text = _cut_at_stop(turn.text, self.stop)
        if self.mode != "none":
            calls = [c for c in parse_tool_calls(text, self.offered) if c.valid]
            if calls:
                content = text_outside_calls(text) or None
                return {"role": "assistant", "content": content, "tool_calls": [openai_tool_call(c) for c in calls]}, "tool_calls"
        return {"role": "assistant", "content": text}, turn.result.finish_reason


def _cut_at_stop(text: str, stop: list[str]) -> str:
    cuts = [text.index(s) for s in stop if s in text]
    return text[: min(cuts)] if cuts else text


def _logprobs(engine, turn: Turn) -> dict[str, Any]:
    content = []
    for token, lp in zip(turn.result.token_ids, turn.result.logprobs):
        text = engine.tokenizer.decode([token], skip_special_tokens=False)
        content.append({"token": text, "logprob": lp, "bytes": list(text.encode()), "top_logprobs": []})
    return {"content": content}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    req = parse_body(ChatRequest, await read_json(request))
    plan = ChatPlan(request, req)
    if req.stream:
        return await _stream(request, plan)
    app, created = request.app, int(time.time())
    results = await asyncio.gather(*(_sample(request, plan, p) for p in plan.params))
    turns = [decode_turn(app[ENGINE], r) for r in results]
    choices = []
    for i, turn in enumerate(turns):
        message, finish = plan.message(turn)
        choice = {"index": i, "message": message, "finish_reason": finish, "logprobs": None}
        if req.logprobs:
            choice["logprobs"] = _logprobs(app[ENGINE], turn)
        choices.append(choice)
    await _maybe_record(request, plan, turns)
    completion = sum(len(t.result.token_ids) for t in turns)
    return web.json_response({
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": created, "model": plan.model,
        "choices": choices, "system_fingerprint": f"slca-v{max(t.result.policy_version for t in turns)}",
        "policy_version": max(t.result.policy_version for t in turns),
        "usage": {"prompt_tokens": len(plan.prompt_ids) * len(turns), "completion_tokens": completion,
                  "total_tokens": len(plan.prompt_ids) * len(turns) + completion},
    })  # fmt: skip


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
        traj = builder.build(
            task_id=task_id, tools=plan.tools, messages=plan.messages + [message], tool_calls=[],
            ground_truth=None, meta={"source": "chat", "engine": request.app[ENGINE].name},
            fallback_version=request.app[ENGINE].version,
        )  # fmt: skip
        await request.app[RECORDER].record(traj)


# --- streaming ----------------------------------------------------------------------------------
async def _stream(request: web.Request, plan: ChatPlan) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": plan.model}  # fmt: skip
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


def _delta(i: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"index": i, "delta": delta, "finish_reason": finish, "logprobs": None}


async def _stream_choice(request, plan: ChatPlan, i: int, params: SamplingParams, events: asyncio.Queue) -> None:
    """Emit one choice's deltas. Plain text streams as it is sampled; when tools may be called the turn is
    buffered (a `<tool_call>` cannot be told from prose until it closes) and then sent as tool-call deltas."""
    engine = request.app[ENGINE]
    try:
        await events.put(_delta(i, {"role": "assistant", "content": ""}))
        if plan.mode == "none":
            turn = await _stream_text(request, plan, i, params, events)
            await events.put(_delta(i, {}, turn.result.finish_reason))
        else:
            turn = decode_turn(engine, await _sample(request, plan, params))
            message, finish = plan.message(turn)
            for delta in _message_deltas(message):
                await events.put(_delta(i, delta))
            await events.put(_delta(i, {}, finish))
        await events.put(len(turn.result.token_ids))
    except ServeError as exc:
        await events.put(exc)
    finally:
        await events.put(None)


async def _stream_text(request, plan: ChatPlan, i: int, params: SamplingParams, events: asyncio.Queue) -> Turn:
    engine, metrics = request.app[ENGINE], request.app[METRICS]
    ids, lps, versions, sent, finish = [], [], [], 0, "length"
    hold = max((len(s) for s in plan.stop), default=1) - 1  # a stop string may still be completing
    try:
        async for step in engine.stream(plan.prompt_ids, params):
            ids += step.token_ids
            lps += step.logprobs
            versions += [step.version] * len(step.token_ids)
            finish = step.finish_reason or finish
            body = [t for t in ids if t not in end_ids(engine)]
            text = _cut_at_stop(engine.tokenizer.decode(body, skip_special_tokens=False), plan.stop)
            upto = len(text) if step.finish_reason else max(sent, len(text) - hold)
            if upto > sent and not text[sent:upto].endswith("\ufffd"):
                await events.put(_delta(i, {"content": text[sent:upto]}))
                sent = upto
    except EngineError as exc:
        metrics.engine_failures.inc()
        raise EngineUnavailable(f"engine unavailable: {exc}") from None
    metrics.tokens_generated.inc(len(ids))
    return decode_turn(engine, GenerationResult(ids, lps, finish, versions))


def _message_deltas(message: dict[str, Any]) -> list[dict[str, Any]]:
    deltas = []
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for k, call in enumerate(message.get("tool_calls") or []):
        args = call["function"]["arguments"]
        half = len(args) // 2
        deltas.append({"tool_calls": [{"index": k, "id": call["id"], "type": "function",
                                       "function": {"name": call["function"]["name"], "arguments": ""}}]})  # fmt: skip
        for piece in (args[:half], args[half:]):
            if piece:
                deltas.append({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
    return deltas


