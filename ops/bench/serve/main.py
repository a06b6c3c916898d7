"""`slca bench serve`, the plan, by the shared method of `ops.bench.ab` (issue 22).

The baseline (vLLM's own OpenAI server, configured as slca's engine is: `servers.project_engine_kwargs`) runs
for the whole bench; each slca target is started beside it in turn, and for every comparison and concurrency the
two servers are measured in alternated windows (A B, B A, …, 6 pairs by default), each window ≥ `--waves` waves of
`clients` requests and ≥ `--window-s` seconds (2 minutes by default), after the same warm-up on both. The prompts
are `--prompts`' (default `tools`: tool schemas in the system prompt and a multi-turn history,
`ops.bench.serve.prompts`; agent runs get the tools and `--agent-turns` turns). Comparisons, like against like:

- `chat-stream`: streamed chat on both (TTFT = first content chunk);
- `chat-whole`: non-streamed chat on both;
- `agent`: slca's agent runs (recorded to the Redis stream as in production, whole trajectories; with tools, the
  calls executed between turns) against the baseline's non-streamed chat (non-streamed against non-streamed).

Reported per (target, comparison, clients): the per-pair tokens/s ratios target ÷ baseline, the median with
min–max and its order-statistic interval, each side's figures over all its windows, and the claim the lowest pair
supports (`report.claim`); table + JSON without machine paths."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ops.bench import ab
from ops.bench.common import bench_command, model_name
from ops.bench.serve import load
from ops.bench.serve.report import BASELINE, COMPARISONS, Comparison, HEADER, summarise, table_row, write
from ops.bench.servers import (
    BENCH_MODEL,
    ServerFailed,
    port,
    project_engine_kwargs,
    running,
    slca_serve_cmd,
    vllm_server_cmd,
)

SLCA_TARGETS: dict[str, dict[str, object]] = {
    "slca-vllm-core": {"serve.engine": "vllm", "serve.vllm_engine_core_process": "true"},
    "slca-vllm-inproc": {"serve.engine": "vllm", "serve.vllm_engine_core_process": "false"},
    "slca-hf": {"serve.engine": "hf"},
}
"""slca's engine setups: the engine core in its own process, the in-process engine loop, transformers (reference)."""
TARGETS = (BASELINE, *SLCA_TARGETS)
SIDE_API = {
    "chat-stream": ((load.CHAT, True), (load.CHAT, True)),
    "chat-whole": ((load.CHAT, False), (load.CHAT, False)),
    "agent": ((load.CHAT, False), (load.AGENT, False)),
}
"""Per comparison: (baseline's api, streamed), (target's api, streamed)."""


def run_serve_bench(settings, common, args) -> int:
    from slca.models.precision import choose_precision

    baseline = _names([args.baseline], TARGETS, "baseline")[0]
    targets = _names(args.targets, TARGETS, "target")
    targets = [t for t in targets if t != BASELINE]
    comparisons = _names(args.comparisons, COMPARISONS, "comparison")
    model_dir = common.model_path()
    dtype = choose_precision(settings.dtype).dtype
    rule = ab.WindowRule(min_waves=args.waves, min_seconds=args.window_s)
    workload = workload_of(args)
    header = {
        "command": bench_command("serve", sys.argv),
        "method": "ops.bench.ab",
        "model": model_name(model_dir),
        "dtype": dtype,
        "baseline": baseline,
        "max_tokens": args.max_tokens,
        "prompts": workload.prompts,
        "agent_turns": workload.agent_turns,
        "clients": args.clients,
        "hf_clients": args.hf_clients,
        "pairs": args.pairs,
        "order": args.order,
        "seed": args.seed,
        "window": {"min_waves": rule.min_waves, "min_seconds": rule.min_seconds, "wave": "one request per client"},
        "machine_start": ab.machine_now(),
    }
    notes = [
        "chat-stream: streamed on both sides (TTFT = first content chunk); chat-whole: non-streamed on both; "
        f"agent: POST /v1/agent/runs, ≤ {workload.agent_turns} turn(s), record=true (to the Redis stream, as in "
        "production), against the baseline's non-streamed chat",
        PROMPT_NOTES[workload.prompts],
        "ratio: target ÷ baseline tokens/s per pair of alternated windows; request i carries prompt i and seed i "
        "on every server; both servers run side by side, measured one at a time",
        "baseline vLLM server: slca's engine arguments as flags (serve/engines/vllm_common.py engine_kwargs)",
    ]
    print(
        f"slca bench serve — model={header['model']} dtype={dtype} baseline={baseline} clients={args.clients} "
        f"pairs={args.pairs} load={header['machine_start']['load_average']}",
        flush=True,
    )
    print(HEADER, flush=True)
    # each finished row is kept as it ends: the same command resumes an interrupted bench (1–2 h at the defaults)
    done = resumed_rows(args, header, rule)
    rows: list[Comparison] = list(done.values())
    for row in rows:
        print(table_row(row) + " (measured before the interruption)", flush=True)
    with tempfile.TemporaryDirectory(prefix="slca-bench-serve-") as tmp:
        from slca.redis_server import RedisServer

        redis = RedisServer(Path(tmp) / "redis", appendonly=False).start()
        try:
            with _server(baseline, settings, model_dir, redis.url, Path(tmp)) as base_url:
                header["baseline_flags"] = _baseline_flags(baseline, model_dir, settings)
                for target in targets:
                    levels = args.hf_clients if "slca-hf" in (target, baseline) else args.clients
                    todo = [(c, n) for c in comparisons for n in levels if (target, c, n) not in done]
                    if not todo:
                        continue
                    try:
                        with _server(target, settings, model_dir, redis.url, Path(tmp)) as url:
                            for comparison, clients in todo:
                                rows.append(compare(target, comparison, clients, base_url, url, args, rule))
                                done[rows[-1].key] = rows[-1]
                                row_log(args, header, rule).add(rows[-1].to_dict())
                                print(table_row(rows[-1]), flush=True)
                    except ServerFailed as exc:
                        notes.append(f"{target} did not run: {str(exc).splitlines()[0]}")
                        print(f"note: {exc}", flush=True)
        except ServerFailed as exc:
            notes.append(f"baseline {baseline} did not run: {str(exc).splitlines()[0]}")
            print(f"note: {exc}", flush=True)
        finally:
            redis.kill()
    header["machine_end"] = ab.machine_now()
    if args.out:
        write(args.out, rows, header, notes)
        print(f"wrote {args.out}/table.md and results.json")
    return 0 if rows and not any(r.a.failed or r.b.failed for r in rows) else 1


def compare(
    target: str,
    comparison: str,
    clients: int,
    base_url: str,
    url: str,
    args,
    rule: ab.WindowRule,
    measure: Callable = load.measure,
) -> Comparison:
    """One comparison at one concurrency: alternated windows of the baseline (A) and the target (B)."""
    (api_a, stream_a), (api_b, stream_b) = SIDE_API[comparison]
    workload = workload_of(args)
    sides, samples = {}, {"A": [], "B": []}
    for label, server_url, api, stream in (("A", base_url, api_a, stream_a), ("B", url, api_b, stream_b)):

        def wave(server_url=server_url, api=api, stream=stream, label=label) -> ab.Wave:
            got, seconds = measure(
                server_url,
                api,
                clients,
                _requests(clients, args),
                args.max_tokens,
                BENCH_MODEL,
                stream,
                workload=workload,
            )
            samples[label].append((got, seconds))
            ok = [s for s in got if s.error is None]
            return ab.Wave(sum(s.tokens for s in ok), seconds, {"requests": len(got), "failed": len(got) - len(ok)})

        def warm(server_url=server_url, api=api, stream=stream) -> None:  # first-step work must not count
            measure(server_url, api, 2, 2, 8, BENCH_MODEL, stream, workload=workload)

        sides[label] = ab.Side(
            f"{args.baseline} {api}" if label == "A" else f"{target} {api}", ab.waves(wave, rule), warm
        )
    result = ab.alternate(sides["A"], sides["B"], pairs=args.pairs, order=args.order, seed=args.seed, warmup=1)
    figures = {
        k: summarise(sides[k].name, api, clients, [s for got, _ in v for s in got], sum(t for _, t in v))
        for k, v, api in (("A", samples["A"], api_a), ("B", samples["B"], api_b))
    }
    return Comparison(target, comparison, clients, figures["A"], figures["B"], result)


ROWS_FILE = "rows.jsonl"
"""Beside results.json: every finished row (one target, comparison and concurrency), for a resumed run."""


def row_log(args, header: dict, rule: ab.WindowRule) -> "ab.ResumeLog | _NoLog":
    """The resume file of a run writing to `--out` (without one, a log that keeps nothing: nothing to resume into)."""
    if not args.out:
        return _NoLog()
    keys = ("model", "dtype", "baseline", "max_tokens", "prompts", "agent_turns", "pairs", "order", "seed")
    return ab.ResumeLog(
        ab.resume_path(args.out, ROWS_FILE),
        {
            **{k: header[k] for k in keys},
            "window": [rule.min_waves, rule.min_seconds],
            "min_requests": args.min_requests,
            "machine": ab.machine_identity(),
        },
    )


class _NoLog:
    def load(self) -> list[dict]:
        return []

    def add(self, record: dict) -> None:
        pass


def resumed_rows(args, header: dict, rule: ab.WindowRule) -> dict[tuple[str, str, int], Comparison]:
    from slca.cli import CliError

    try:
        rows = [Comparison.from_dict(r) for r in row_log(args, header, rule).load()]
    except ab.ResumeError as exc:
        raise CliError(str(exc)) from exc
    return {r.key: r for r in rows}


def _baseline_flags(baseline: str, model_dir: Path, settings) -> list[str] | None:
    if baseline != BASELINE:
        return None
    from ops.bench.servers import engine_flags

    flags = engine_flags(project_engine_kwargs(model_dir, settings))
    i = flags.index("--model")
    return flags[:i] + flags[i + 2 :]  # the model is named in the header, not by its path


def _server(target: str, settings, model_dir: Path, redis_url: str, tmp: Path):
    """A running server for `target` (a context manager yielding its URL)."""
    from contextlib import contextmanager

    @contextmanager
    def started():
        p = port()
        if target == BASELINE:
            cmd = vllm_server_cmd(p, project_engine_kwargs(model_dir, settings))
            ctx = running(cmd, f"http://127.0.0.1:{p}/health", tmp / "vllm-server.log")
        else:
            overrides = {
                "serve.dtype": settings.dtype,
                "serve.max_model_len": settings.max_model_len,
                "serve.max_batch": settings.max_batch,
                "serve.kv_cache_gib": settings.kv_cache_gib,
                **SLCA_TARGETS[target],
            }
            ctx = running(
                slca_serve_cmd(model_dir, redis_url, p, overrides),
                f"http://127.0.0.1:{p}/readyz",
                tmp / f"{target}-{p}.log",
            )
        with ctx as seconds:
            print(f"# {target} ready in {seconds:.0f}s", flush=True)
            yield f"http://127.0.0.1:{p}"

    return started()


PROMPT_NOTES = {
    load.SHORT: "prompts: eight short questions (≈ 10 tokens), no tools",
    load.TOOLS: "prompts: tool-calling conversations (ops/bench/serve/prompts.py): six tool schemas in the system "
    "prompt and a five-turn history (question, tool call, tool answer, reply, follow-up); chat requests carry the "
    "schemas as system text, agent runs as tools (rendered by slca, calls answered by the sim)",
}


def workload_of(args) -> load.Workload:
    """The requests' workload: `--prompts` and `--agent-turns`."""
    return load.Workload(prompts=args.prompts, agent_turns=args.agent_turns)


def _requests(clients: int, args) -> int:
    """Requests per wave: every client sends at least one, and at least `--min-requests` in all."""
    return max(clients, args.min_requests)


def _names(given: list[str], known: tuple[str, ...], what: str) -> list[str]:
    unknown = [n for n in given if n not in known]
    if unknown:
        from slca.cli import CliError

        raise CliError(f"unknown {what}(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return given
