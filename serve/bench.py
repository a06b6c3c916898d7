"""`slca bench serve`: tokens/s on the same prompts, in one run, of
  1. the raw engine (requests straight into the engine, concurrently),
  2. the agent API (`POST /v1/agent/runs`, one turn, over HTTP, same engine instance),
  3. the chat API (`POST /v1/chat/completions`, over HTTP),
  4. vLLM's own OpenAI server (a separate process) where it starts,
and optionally the same requests one by one (sequential baseline). Printed as ratios to the raw engine.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass

PROMPTS = [
    "Tell me about the history of the bicycle.", "How do tides work?", "Write a short poem about autumn.",
    "Explain what a hash table is.", "What should I pack for a weekend hike?", "Describe how bread rises.",
    "Give three tips for learning a language.", "Why is the sky blue?",
]  # fmt: skip


@dataclass
class Measurement:
    name: str
    tokens: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def _messages(i: int) -> list[dict]:
    return [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]


async def _raw_engine(engine, n: int, max_tokens: int, concurrent: bool) -> Measurement:
    from serve.engines.base import SamplingParams, generate
    from serve.prompting import prompt_chunks, to_template_messages

    prompts = [[t for ids, _ in prompt_chunks(engine.tokenizer, to_template_messages(_messages(i), None)) for t in ids]
               for i in range(n)]  # fmt: skip
    params = [SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=i) for i in range(n)]
    t0 = time.perf_counter()
    if concurrent:
        results = await asyncio.gather(*(generate(engine, p, s) for p, s in zip(prompts, params)))
    else:
        results = [await generate(engine, p, s) for p, s in zip(prompts, params)]
    return Measurement("raw engine" + ("" if concurrent else " (sequential)"), sum(len(r.token_ids) for r in results),
                       time.perf_counter() - t0)  # fmt: skip


async def _http(url: str, path: str, n: int, max_tokens: int, model: str | None, concurrent: bool = True) -> Measurement:
    import aiohttp

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3600)) as session:

        async def one(i: int) -> int:
            body = {"messages": _messages(i), "max_tokens": max_tokens, "seed": i, "temperature": 1.0}
            if model:
                body["model"] = model
            if path == "/v1/agent/runs":
                body.update(task_id=f"bench-{i}", n=1, max_turns=1, record=False, return_trajectories=True)
            async with session.post(url + path, json=body) as r:
                data = await r.json()
                if r.status != 200:
                    raise RuntimeError(f"{path}: HTTP {r.status}: {data}")
            if path == "/v1/agent/runs":
                traj = data["runs"][0]["trajectory"]
                return sum(1 for lp in traj["logprobs"] if lp is not None)
            return data["usage"]["completion_tokens"]

        t0 = time.perf_counter()
        if concurrent:
            counts = await asyncio.gather(*(one(i) for i in range(n)))
        else:
            counts = [await one(i) for i in range(n)]
        return Measurement(path + ("" if concurrent else " (sequential)"), sum(counts), time.perf_counter() - t0)


async def _bench_in_process(settings, common, args, report) -> None:
    from aiohttp import web

    from serve.app import create_app
    from serve.engines.base import create_engine
    from serve.keys import ENGINE
    from slca.redis_server import free_port

    settings = settings.model_copy(update={"subscribe_weights": False, "port": free_port()})
    app = create_app(settings, common, engine_factory=lambda: create_engine(settings.engine, str(common.model_path()),
                                                                            settings))  # fmt: skip
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", settings.port)
    await site.start()
    url, engine = f"http://127.0.0.1:{settings.port}", app[ENGINE]
    try:
        await _raw_engine(engine, 2, 8, True)  # warm-up: first-step compilation must not count
        report(await _raw_engine(engine, args.requests, args.max_tokens, True))
        report(await _http(url, "/v1/agent/runs", args.requests, args.max_tokens, None))
        report(await _http(url, "/v1/chat/completions", args.requests, args.max_tokens, None))
        if args.sequential:
            report(await _raw_engine(engine, args.requests, args.max_tokens, False))
            report(await _http(url, "/v1/chat/completions", args.requests, args.max_tokens, None, False))
    finally:
        await runner.cleanup()


def _vllm_server(settings, common, args) -> Measurement | str:
    """vLLM's own OpenAI server on the same model, same prompts; a string says why it did not run."""
    from slca.redis_server import free_port

    port = free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(common.model_path()),
           "--dtype", settings.dtype, "--enforce-eager", "--port", str(port), "--max-model-len",
           str(settings.max_model_len), "--served-model-name", "bench"]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(max(1, int(settings.kv_cache_gib)))}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if not _wait_http(f"http://127.0.0.1:{port}/health", proc, timeout=300):
            return "vLLM's OpenAI server did not start within 300 s"
        url = f"http://127.0.0.1:{port}"
        asyncio.run(_http(url, "/v1/chat/completions", 2, 8, "bench"))
        return asyncio.run(_http(url, "/v1/chat/completions", args.requests, args.max_tokens, "bench"))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)


def _wait_http(url: str, proc: subprocess.Popen, timeout: float) -> bool:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(1.0)
    return False


class _Table:
    """Prints each measurement as soon as it exists, as a ratio to the first (the raw engine)."""

    def __init__(self):
        self.base: float | None = None

    def __call__(self, m: Measurement) -> None:
        self.base = self.base or m.rate
        print(f"{m.name:45s} {m.tokens:7d} {m.seconds:8.2f} {m.rate:8.1f} {m.rate / self.base:6.2f}", flush=True)


def run_serve_bench(settings, common, args) -> int:
    print(f"slca bench serve — engine={settings.engine} model={common.model_path().name} "
          f"requests={args.requests} max_tokens={args.max_tokens}")  # fmt: skip
    print(f"{'path':45s} {'tokens':>7s} {'seconds':>8s} {'tok/s':>8s} {'ratio':>6s}", flush=True)
    table = _Table()
    asyncio.run(_bench_in_process(settings, common, args, table))
    if settings.engine == "vllm" and not args.no_vllm_server:
        vllm = _vllm_server(settings, common, args)
        if isinstance(vllm, Measurement):
            vllm.name = "vLLM OpenAI server /v1/chat/completions"
            table(vllm)
        else:
            print(f"note: {vllm}")
    return 0
