"""One measurement: `requests` requests through `clients` concurrent clients against one server's API.

Chat requests are streamed (the time to the first token is what a client sees: the first chunk with content) or
not (`stream=False`: the whole answer, latency only); agent runs return whole trajectories, so they are compared
with non-streamed chat requests, and are sent recorded (`record=True`: the trajectory goes to the Redis stream,
as in production). Request i always carries prompt i and seed i: every server gets the same prompts and
sampling. The prompts are a `Workload`'s: eight short questions, or tool-calling conversations
(`ops.bench.serve.prompts`: tool schemas in the system prompt, a multi-turn history; agent runs get the tools and
may call them for `agent_turns` model turns)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

PROMPTS = [
    "Tell me about the history of the bicycle.",
    "How do tides work?",
    "Write a short poem about autumn.",
    "Explain what a hash table is.",
    "What should I pack for a weekend hike?",
    "Describe how bread rises.",
    "Give three tips for learning a language.",
    "Why is the sky blue?",
]

CHAT = "chat"
AGENT = "agent"
PATHS = {CHAT: "/v1/chat/completions", AGENT: "/v1/agent/runs"}
SHORT = "short"
TOOLS = "tools"
WORKLOADS = (SHORT, TOOLS)


@dataclass(frozen=True)
class Workload:
    prompts: str = SHORT
    """'short': one short question (`PROMPTS`); 'tools': a tool-calling conversation (`ops.bench.serve.prompts`)."""
    agent_turns: int = 1
    """An agent run's model turns at most (with 'tools' the calls in between are executed)."""


@dataclass
class Sample:
    tokens: int
    latency_s: float
    ttft_s: float | None
    error: str | None = None
    prompt_tokens: int | None = None
    """The (first) prompt's tokens as the server counted them (None: not reported)."""


def request_body(
    api: str,
    i: int,
    max_tokens: int,
    model: str | None,
    stream: bool = True,
    record: bool = True,
    workload: Workload = Workload(),
) -> dict:
    from ops.bench.serve import prompts

    if workload.prompts not in WORKLOADS:
        raise ValueError(f"prompts {workload.prompts!r}: one of {', '.join(WORKLOADS)}")
    if workload.prompts == SHORT:
        messages = [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]
    else:
        messages = prompts.chat_messages(i) if api == CHAT else prompts.agent_messages(i)
    body: dict = {"messages": messages, "max_tokens": max_tokens, "seed": i, "temperature": 1.0}
    if model:
        body["model"] = model
    if api == CHAT:
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
    else:
        body.update(task_id=f"bench-{i}", n=1, max_turns=workload.agent_turns, record=record, return_trajectories=True)
        if workload.prompts == TOOLS:
            body["tools"] = prompts.TOOLS
    return body


async def _chat(session, url: str, body: dict) -> Sample:
    if not body.get("stream"):
        return await _chat_whole(session, url, body)
    t0 = time.perf_counter()
    ttft, tokens, prompt = None, 0, None
    async with session.post(url + PATHS[CHAT], json=body) as r:
        if r.status != 200:
            return Sample(0, time.perf_counter() - t0, None, f"HTTP {r.status}: {(await r.text())[:200]}")
        async for raw in r.content:
            line = raw.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            event = json.loads(line[5:])
            if "error" in event:
                return Sample(tokens, time.perf_counter() - t0, ttft, str(event["error"])[:200])
            if ttft is None and any((c.get("delta") or {}).get("content") for c in event.get("choices", [])):
                ttft = time.perf_counter() - t0
            if event.get("usage"):
                tokens, prompt = event["usage"]["completion_tokens"], event["usage"].get("prompt_tokens")
    return Sample(tokens, time.perf_counter() - t0, ttft, prompt_tokens=prompt)


async def _chat_whole(session, url: str, body: dict) -> Sample:
    t0 = time.perf_counter()
    async with session.post(url + PATHS[CHAT], json=body) as r:
        data = await r.json(content_type=None)
        if r.status != 200:
            return Sample(0, time.perf_counter() - t0, None, f"HTTP {r.status}: {str(data)[:200]}")
    usage = data.get("usage") or {}
    return Sample(
        int(usage.get("completion_tokens") or 0),
        time.perf_counter() - t0,
        None,
        prompt_tokens=usage.get("prompt_tokens"),
    )


async def _agent(session, url: str, body: dict) -> Sample:
    t0 = time.perf_counter()
    async with session.post(url + PATHS[AGENT], json=body) as r:
        data = await r.json()
        if r.status != 200:
            return Sample(0, time.perf_counter() - t0, None, f"HTTP {r.status}: {str(data)[:200]}")
    traj = data["runs"][0]["trajectory"]
    generated = [lp is not None for lp in traj["logprobs"]]
    prompt = generated.index(True) if True in generated else len(generated)  # the tokens before the first sampled one
    return Sample(sum(generated), time.perf_counter() - t0, None, prompt_tokens=prompt)


async def run_load(
    url: str,
    api: str,
    clients: int,
    requests: int,
    max_tokens: int,
    model: str | None = None,
    stream: bool = True,
    first: int = 0,
    workload: Workload = Workload(),
) -> tuple[list[Sample], float]:
    """Every request's sample, and the wall time from the first request sent to the last answer."""
    import aiohttp

    gate = asyncio.Semaphore(clients)
    send = _chat if api == CHAT else _agent
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=1800)) as session:

        async def one(i: int) -> Sample:
            async with gate:
                try:
                    return await send(session, url, request_body(api, i, max_tokens, model, stream, workload=workload))
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    return Sample(0, 0.0, None, repr(exc))

        t0 = time.perf_counter()
        samples = await asyncio.gather(*(one(i) for i in range(first, first + requests)))
        return list(samples), time.perf_counter() - t0


def measure(
    url: str,
    api: str,
    clients: int,
    requests: int,
    max_tokens: int,
    model: str | None = None,
    stream: bool = True,
    first: int = 0,
    workload: Workload = Workload(),
):
    """Samples and wall seconds of requests first … first + requests − 1."""
    return asyncio.run(run_load(url, api, clients, requests, max_tokens, model, stream, first, workload))
