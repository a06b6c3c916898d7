"""`slca bench shape-rss`: does serve's memory climb with new batch shapes, and what does bounding oneDNN's
primitive cache cost? Side A is oneDNN's own default (1,024 entries), side B `serve.onednn_primitive_cache`.

Why a bench of its own: `slca bench soak` saw serve's RSS climb for ten minutes; on CPU every batch shape (the
tokens in one engine step) that the engine has not seen builds matmul primitives, and oneDNN keeps up to
ONEDNN_PRIMITIVE_CACHE_CAPACITY of them. oneDNN reads that variable once per process, so each window is a fresh
child process (`python -m ops.bench.shape_rss --child …`) running the serve engine in-process on the embedded model:
it starts, then sends `--requests` requests whose prompt lengths are drawn anew for every window (new shapes,
`--concurrency` at a time), and reports its RSS every `--every` requests and the seconds the requests took.
Windows alternate A B / B A (ops/bench/ab.py); the figure is requests per second, the RSS growth is reported
per window beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from ops.bench.ab import Measurement, Side, alternate, per_side, report
from ops.bench.common import bench_command, own_memory_mib

CHILD_TIMEOUT_S = 1200.0
ONEDNN_DEFAULT = 1024
"""oneDNN's own capacity (side A: what a user gets without the setting)."""


async def _child(args) -> dict:
    from serve.engines.base import SamplingParams, create_engine
    from serve.settings import ServeSettings

    settings = ServeSettings(engine=args.engine, max_model_len=2048, kv_cache_gib=1, onednn_primitive_cache=0)
    engine = create_engine(args.engine, args.model, settings)
    await engine.start()
    rng = random.Random(args.seed)
    rss = [round(own_memory_mib(), 1)]

    async def one() -> None:
        prompt = [rng.randrange(200, 40000) for _ in range(rng.randrange(args.min_len, args.max_len))]
        async for _ in engine.stream(prompt, SamplingParams(max_tokens=args.max_tokens)):
            pass

    began, done = time.perf_counter(), 0
    while done < args.requests:
        batch = min(args.concurrency, args.requests - done)
        await asyncio.gather(*(one() for _ in range(batch)))
        done += batch
        if done % args.every < batch or done == args.requests:
            rss.append(round(own_memory_mib(), 1))
    seconds = time.perf_counter() - began
    await engine.close()
    capacity = os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY")
    return {"requests": done, "seconds": seconds, "rss_mib": rss, "capacity": capacity}


def _window(args, capacity: int, seed: int) -> Measurement:
    argv = [sys.executable, "-m", "ops.bench.shape_rss", "--child", "--seed", str(seed)]
    for name in ("model", "engine", "requests", "concurrency", "every", "min_len", "max_len", "max_tokens"):
        argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    env = {**os.environ, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": str(capacity)}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"shape-rss child failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    got = json.loads(lines[-1])
    rss = got["rss_mib"]
    if got.get("capacity") != str(capacity):
        raise RuntimeError(f"the child ran with ONEDNN_PRIMITIVE_CACHE_CAPACITY={got.get('capacity')}, not {capacity}")
    detail = {"capacity": capacity, "seed": seed, "rss_mib": rss, "rss_growth_mib": round(rss[-1] - rss[0], 1)}
    return Measurement(got["requests"] / got["seconds"], got["requests"], got["seconds"], 1, detail)


def run_shape_rss(args, config) -> int:
    from slca.models.paths import find_model_dir

    if args.pairs < 3 or args.requests < 1 or args.b_capacity < 1:
        print("error: --pairs ≥ 3, --requests ≥ 1, --b-capacity ≥ 1", file=sys.stderr)
        return 2
    args.model = str(find_model_dir(args.model or config.common.model, config.common.cache_dir))
    seeds = iter(range(1, 10_000))  # every window draws new lengths: no side meets shapes the other warmed
    a = Side(f"oneDNN default ({ONEDNN_DEFAULT})", lambda: _window(args, ONEDNN_DEFAULT, next(seeds)))
    b = Side(f"serve.onednn_primitive_cache={args.b_capacity}", lambda: _window(args, args.b_capacity, next(seeds)))

    def show(w) -> None:
        print(f"pair {w.pair} {w.side}: {w.figure:.3f} req/s, RSS +{w.detail['rss_growth_mib']} MiB", flush=True)

    result = alternate(a, b, pairs=args.pairs, warmup=0, on_window=show)
    growth = per_side(result, "rss_growth_mib")
    header = {
        "command": bench_command("shape-rss", sys.argv),
        "engine": args.engine,
        "model": Path(args.model).name,
        "requests_per_window": args.requests,
        "concurrency": args.concurrency,
        "prompt_tokens": [args.min_len, args.max_len],
        "max_tokens": args.max_tokens,
        "rss_growth_mib": growth,
    }
    heading = "RSS growth per window (MiB, start of requests → end):"
    report(args.out, header, result, "requests/s", (heading, growth), "slca bench shape-rss")
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", default="vllm", help="serve engine run in-process (vllm or hf)")
    p.add_argument("--model", help="model directory (default: the configured model)")
    p.add_argument("--requests", type=int, default=240, help="requests per window")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--every", type=int, default=30, help="RSS sampled every this many requests")
    p.add_argument("--min-len", type=int, default=30, help="shortest prompt (tokens)")
    p.add_argument("--max-len", type=int, default=900, help="longest prompt (tokens, exclusive)")
    p.add_argument("--max-tokens", type=int, default=16)


def main() -> None:
    p = argparse.ArgumentParser(description="one window of `slca bench shape-rss` (a child process)")
    p.add_argument("--child", action="store_true", required=True)
    p.add_argument("--seed", type=int, required=True)
    add_arguments(p)
    args = p.parse_args()
    print(json.dumps(asyncio.run(_child(args))), flush=True)


if __name__ == "__main__":
    main()
