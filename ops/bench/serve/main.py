"""`slca bench serve`, the plan: for each target (vLLM's own OpenAI server first: the baseline), start it in its
own process, warm it up, then for each concurrency send the same requests through the chat API (and the agent API
for slca), print each row as it comes with its ratio to vLLM's server, stop it; finally write table + JSON."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from ops.bench.common import bench_command
from ops.bench.serve import load
from ops.bench.serve.report import BASELINE, HEADER, Figures, summarise, table_row, write
from ops.bench.servers import BENCH_MODEL, ServerFailed, port, running, slca_serve_cmd, vllm_server_cmd

SLCA_TARGETS: dict[str, dict[str, object]] = {
    "slca-vllm-core": {"serve.engine": "vllm", "serve.vllm_engine_core_process": "true"},
    "slca-vllm-inproc": {"serve.engine": "vllm", "serve.vllm_engine_core_process": "false"},
    "slca-hf": {"serve.engine": "hf"},
}
"""slca's engine setups: the engine core in its own process, the in-process engine loop, transformers (reference)."""
TARGETS = (BASELINE, *SLCA_TARGETS)
CPU_FLAGS_OF_NOTE = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def run_serve_bench(settings, common, args) -> int:
    from slca.models.precision import choose_precision, cpu_flags

    targets = _names(args.targets, TARGETS, "target")
    model_dir = common.model_path()
    dtype = choose_precision(settings.dtype).dtype
    header = {
        "command": bench_command("serve", sys.argv),
        "model": model_dir.name, "dtype": dtype, "max_tokens": args.max_tokens, "clients": args.clients,
        "requests": {c: _requests(c, args) for c in args.clients}, "hf_clients": args.hf_clients,
        "cpu_flags": sorted(f for f in CPU_FLAGS_OF_NOTE if f in cpu_flags()), "cpus": os.cpu_count(),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
    }  # fmt: skip
    notes = ["chat: streamed (TTFT = first content chunk), plain requests (no logprobs asked); agent: "
             "POST /v1/agent/runs, one turn, record=false, whole trajectories (latency only: no first-token event)",
             "ratio: tokens/s ÷ vLLM's own server (chat API) at the same number of clients; request i carries prompt "
             "i and seed i on every target",
             "targets run one after another on the same machine: a busy machine moves every absolute figure"]  # fmt: skip
    print(f"slca bench serve — model={model_dir.name} dtype={dtype} max_tokens={args.max_tokens} clients={args.clients} "
          f"load={header['load_average_start']}", flush=True)  # fmt: skip
    print(HEADER, flush=True)
    rows: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="slca-bench-serve-") as tmp:
        redis = None
        for target in targets:
            try:
                if target == BASELINE:
                    _bench_vllm_server(settings, model_dir, dtype, args, Path(tmp), rows)
                    continue
                if redis is None:
                    from slca.redis_server import RedisServer

                    redis = RedisServer(Path(tmp) / "redis", appendonly=False).start()
                _bench_slca(target, settings, model_dir, redis.url, args, Path(tmp), rows)
            except ServerFailed as exc:
                notes.append(f"{target} did not run: {str(exc).splitlines()[0]}")
                print(f"note: {exc}", flush=True)
        if redis is not None:
            redis.kill()
    header["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.out:
        write(args.out, rows, header, notes)
        print(f"wrote {args.out}/table.md and results.json")
    return 0 if rows and not any(r.failed for r in rows) else 1


def _bench_vllm_server(settings, model_dir: Path, dtype: str, args, tmp: Path, rows: list[Figures]) -> None:
    p = port()
    cmd = vllm_server_cmd(model_dir, p, dtype, settings.max_model_len, settings.max_batch)
    env = {"VLLM_CPU_KVCACHE_SPACE": str(max(1, int(settings.kv_cache_gib)))}
    with running(cmd, f"http://127.0.0.1:{p}/health", tmp / "vllm-server.log", env) as started:
        print(f"# {BASELINE} ready in {started:.0f}s", flush=True)
        _levels(BASELINE, f"http://127.0.0.1:{p}", (load.CHAT,), args.clients, args, rows)


def _bench_slca(target: str, settings, model_dir: Path, redis_url: str, args, tmp: Path, rows: list[Figures]) -> None:
    p = port()
    overrides = {"serve.dtype": settings.dtype, "serve.max_model_len": settings.max_model_len,
                 "serve.max_batch": settings.max_batch, "serve.kv_cache_gib": settings.kv_cache_gib,
                 **SLCA_TARGETS[target]}  # fmt: skip
    cmd = slca_serve_cmd(model_dir, redis_url, p, overrides)
    with running(cmd, f"http://127.0.0.1:{p}/readyz", tmp / f"{target}.log") as started:
        print(f"# {target} ready in {started:.0f}s", flush=True)
        clients = args.hf_clients if target == "slca-hf" else args.clients
        _levels(target, f"http://127.0.0.1:{p}", (load.CHAT, load.AGENT), clients, args, rows)


def _levels(target: str, url: str, apis: tuple[str, ...], clients: list[int], args, rows: list[Figures]) -> None:
    for api in apis:
        load.measure(url, api, 2, 2, 8, BENCH_MODEL)  # warm-up: first-step work must not count
        for c in clients:
            samples, seconds = load.measure(url, api, c, _requests(c, args), args.max_tokens, BENCH_MODEL)
            rows.append(summarise(target, api, c, samples, seconds))
            print(table_row(rows[-1], rows), flush=True)


def _requests(clients: int, args) -> int:
    """Requests per level: every client sends at least one, and at least `--min-requests` in all."""
    return max(clients, args.min_requests)


def _names(given: list[str], known: tuple[str, ...], what: str) -> list[str]:
    unknown = [n for n in given if n not in known]
    if unknown:
        from slca.cli import CliError

        raise CliError(f"unknown {what}(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return given
