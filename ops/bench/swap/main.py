"""`slca bench swap`: hot-swap under load. `slca serve` (vLLM engine) follows the weight channel of its own Redis
while clients keep sending agent runs (and one-token canary chat requests); the learner's publish path
(`slca.weights.publish`: safetensors + manifest, atomic rename, SET + PUBLISH) announces N perturbed copies of
the weights (≥ 20: `MIN_VERSIONS`). Reported (ops/bench/swap/report.py): swap latency p50/p99 (announcement →
first token of the new version) and end to end (publish began → that token; the bench's own weight perturbation
before each publish is timed apart, with perturbation began → that token beside it), failed swaps (versions never
served; serve's own swap outcomes from /metrics), failed requests (target 0), mixed-version runs in all and per
swap; the load average and CPU flags at start and end; no machine paths (`ops.bench.ab.write`)."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from ops.bench.ab import machine_now
from ops.bench.common import bench_command, model_name
from ops.common.machine import cpu_model
from ops.bench.swap.report import Published, Response, server_swap_outcomes, summarise, table, write
from ops.bench.serve.load import PROMPTS
from ops.bench.servers import BENCH_MODEL, ServerFailed, port, running, slca_serve_cmd


class Publisher:
    """The learner's side: a model whose weights move a little before each publish (seeded noise ∝ each tensor's
    spread), published and announced exactly as the online learner does."""

    def __init__(self, model_dir: Path, weights_dir: Path, redis_url: str, prefix: str, noise: float):
        import redis
        import torch
        from transformers import AutoModelForCausalLM

        from slca.contracts import Streams

        self.model_dir, self.weights_dir, self.noise = model_dir, weights_dir, noise
        self.model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        self.client, self.streams = redis.Redis.from_url(redis_url), Streams(prefix)
        self.last = 0

    def perturb(self) -> None:
        """The bench's stand-in for a training step: seeded noise ∝ each tensor's spread. Not the publish path's
        work, so it is timed apart (`Published.perturb_s`) and outside the end-to-end span (≈ 6 s of it was in it)."""
        import torch

        torch.manual_seed(self.last + 1)
        with torch.no_grad():
            for p in self.model.parameters():
                p.add_(torch.randn_like(p) * (p.float().std() * self.noise))

    def publish_next(self) -> Published:
        from slca.weights import publish

        perturb_began = time.monotonic()
        self.perturb()
        started_at = time.monotonic()  # the publish begins: the end-to-end figure is timed from here
        manifest, seconds = publish(
            self.model,
            self.model_dir,
            self.weights_dir,
            self.last,
            self.last + 1,
            self.model_dir.name,
            self.client,
            self.streams,
            keep=3,
        )
        announced_at = time.monotonic()
        self.last = manifest.version
        return Published(manifest.version, announced_at, seconds, started_at, perturb_s=started_at - perturb_began)


async def _agent_client(session, url: str, k: int, args, stop: asyncio.Event, out: list[Response]) -> None:
    i = 0
    while not stop.is_set():
        body = {
            "messages": [{"role": "user", "content": PROMPTS[(k + i) % len(PROMPTS)]}],
            "task_id": f"swap-{k}-{i}",
            "n": 1,
            "max_turns": 1,
            "max_tokens": args.max_tokens,
            "seed": k * 100_000 + i,
            "record": False,
            "return_trajectories": True,
            "model": BENCH_MODEL,
        }
        out.append(await _post(session, url + "/v1/agent/runs", body, "agent"))
        i += 1


async def _canary(session, url: str, stop: asyncio.Event, out: list[Response]) -> None:
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "model": BENCH_MODEL}
    while not stop.is_set():
        out.append(await _post(session, url + "/v1/chat/completions", body, "canary"))


async def _post(session, url: str, body: dict, kind: str) -> Response:
    import aiohttp

    try:
        async with session.post(url, json=body) as r:
            data = await r.json(content_type=None)
            if r.status != 200:
                return Response(kind, time.monotonic(), False, error=f"HTTP {r.status}: {str(data)[:200]}")
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        return Response(kind, time.monotonic(), False, error=repr(exc)[:200])
    if kind == "canary":
        return Response(kind, time.monotonic(), True, data["policy_version"])
    traj = data["runs"][0]["trajectory"]
    return Response(kind, time.monotonic(), True, traj["policy_version"], bool(traj.get("mixed_version")))


async def _drive(
    url: str, publisher: Publisher, args, serve_rss_mib: Callable[[], float]
) -> tuple[list[Published], list[Response], list[float]]:
    import aiohttp

    stop, responses, published, rss = asyncio.Event(), [], [], []
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        clients = [
            asyncio.create_task(_agent_client(session, url, k, args, stop, responses)) for k in range(args.clients)
        ]
        clients.append(asyncio.create_task(_canary(session, url, stop, responses)))
        await asyncio.sleep(args.warmup_s)
        rss.append(serve_rss_mib())
        for _ in range(args.versions):
            # publishing is blocking work (save, hash, Redis): a thread, so that the clients keep the load steady
            published.append(await loop.run_in_executor(None, publisher.publish_next))
            print(f"announced v{published[-1].version} (publish {published[-1].publish_s:.1f}s)", flush=True)
            await asyncio.sleep(args.interval_s)
            rss.append(serve_rss_mib())
        stop.set()
        await asyncio.gather(*clients)
    return published, responses, rss


def _tree_rss_mib(pid: int) -> float:
    """`pid` and every process below it (vLLM's engine core, where it has its own), resident MiB."""
    from ops.observe.procs import proc_table, tree_rss

    return tree_rss(pid, proc_table()) / 2**20


MIN_VERSIONS = 20


def _server_swaps(url: str) -> dict[str, int] | None:
    from ops.observe.scrape import scrape

    text = scrape(url + "/metrics", 5.0)
    return server_swap_outcomes(text) if text else None


NOTES = [
    "swap latency: announcement (publish() returned) → first response proving a token of that version or "
    "a later one (canaries: one-token chat requests back to back, so the bound is about one engine step)",
    "end to end: publish began (weights written, hashed, announced) → that same response; the bench's own "
    "weight perturbation before each publish (its stand-in for a training step) is outside it, timed apart: "
    "perturbation p50, and perturbation began → that same response",
    "failed swaps: published versions no response ever showed (nor a later one); serve's swaps: its own "
    "slca_swaps_total by outcome and rollbacks at the end of the run",
    "mixed per swap: agent runs flagged mixed-version finishing between a version's announcement and the next one's",
    "failed: every non-200 or broken response among agent runs and canaries",
    "serve RSS: serve's resident set with its children after the warm-up → after the last version's interval "
    "(every sample in results.json: serve_rss_mib)",
]
"""What the table's columns mean (written into results.json and table.md)."""


def run_bench_swap(args, config) -> int:
    from serve.settings import ServeSettings
    from slca.cli import CliError
    from slca.redis_server import RedisServer

    if args.versions < MIN_VERSIONS:
        raise CliError(f"--versions {args.versions}: at least {MIN_VERSIONS} published versions")
    settings, common = config.get(ServeSettings), config.common
    core = settings.vllm_engine_core_process if args.core_process is None else args.core_process
    model_dir = common.model_path()
    header = {
        "command": bench_command("swap", sys.argv),
        "model": model_name(model_dir),
        "engine": "vllm (engine-core process)" if core else "vllm (in-process)",
        "clients": args.clients,
        "versions": args.versions,
        "interval_s": args.interval_s,
        "max_tokens": args.max_tokens,
        "noise": args.noise,
        "serve_heap_mmap_threshold_kib": settings.heap_mmap_threshold_kib,
        "serve_heap_trim_after_swap": settings.heap_trim_after_swap,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "machine_start": machine_now(),
    }
    server_swaps, rss = None, None
    with tempfile.TemporaryDirectory(prefix="slca-bench-swap-") as tmp:
        redis = RedisServer(Path(tmp) / "redis", appendonly=False).start()
        try:
            publisher = Publisher(model_dir, Path(tmp) / "weights", redis.url, common.stream_prefix, args.noise)
            p = port()
            overrides = {
                "serve.engine": "vllm",
                "serve.vllm_engine_core_process": str(core).lower(),
                "weights.follow": "true",
                "serve.max_model_len": settings.max_model_len,
                "serve.kv_cache_gib": settings.kv_cache_gib,
                "serve.dtype": settings.dtype,
                "serve.heap_mmap_threshold_kib": settings.heap_mmap_threshold_kib,
                "serve.heap_trim_after_swap": str(settings.heap_trim_after_swap).lower(),
                "common.stream_prefix": common.stream_prefix,
                # a private, throwaway Redis that only this bench writes: unsigned announcements are safe
                "weights.allow_unsigned": "true",
            }
            cmd = slca_serve_cmd(model_dir, redis.url, p, overrides)
            with running(cmd, f"http://127.0.0.1:{p}/readyz", Path(tmp) / "serve.log") as started:
                print(
                    f"slca serve ready in {started:.0f}s; {args.clients} clients; publishing {args.versions} versions "
                    f"every {args.interval_s:.0f}s",
                    flush=True,
                )
                published, responses, rss = asyncio.run(
                    _drive(f"http://127.0.0.1:{p}", publisher, args, lambda: _tree_rss_mib(started.pid))
                )
                server_swaps = _server_swaps(f"http://127.0.0.1:{p}")
        except ServerFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        finally:
            redis.kill()
    summary = summarise(published, responses, server_swaps, rss)
    header["machine_end"] = machine_now()
    print(table(summary))
    if args.out:
        write(args.out, summary, header, NOTES)
        print(f"wrote {args.out}/table.md and results.json")
    return 0 if summary.failed == 0 and summary.failed_swaps == 0 else 1
