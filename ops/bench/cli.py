"""The `slca bench …` subcommands whose code lives in ops/bench (one module or package per bench):
`serve | learner | learner-memory | sft | sft-memory | queue | rl | learn-vs-trl | swap | soak | shape-rss |
logprob-gap | first-hour | gpu-check`, and
`table` (the README's performance table from their results). `ops.cli` registers them; heavy
imports stay inside the handlers so that `slca --help` stays fast. (`slca bench online | eval | learning` are
ops.cli's, beside the code they measure.)"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# light, all of them: TRL itself is imported by its side only, the benches' code by their handlers
from ops.bench.ab import MIN_PAIRS, ORDERS
from ops.bench.gpu_check import add_arguments as gpu_check_arguments
from ops.bench.learn_vs_trl.flags import FLAGS as LEARN_VS_TRL_FLAGS
from ops.bench.learn_vs_trl.flags import HELP as LEARN_VS_TRL_HELP
from ops.bench.learner_memory import add_arguments as learner_memory_arguments
from ops.bench.rl.trl_side import GENERATIONS as TRL_GENERATIONS
from ops.bench.shape_rss import add_arguments as shape_rss_arguments
from slca.cli.flags import Adder, Flag, add_flags, flag


def _stopping_on_sigterm(handler):
    """A bench started in the background (where SIGINT is ignored) and stopped with SIGTERM still stops the servers
    and workers it started in sessions of their own: SIGTERM becomes a KeyboardInterrupt, so their context
    managers run (a plain SIGTERM left vLLM's server and a Redis running)."""

    def run(args, config) -> int:
        import signal

        def interrupt(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")

        signal.signal(signal.SIGTERM, interrupt)
        return handler(args, config)

    return run


def _ab_args(pairs: int | None = None) -> tuple[Flag, ...]:
    """The shared side-by-side method's knobs (ops/bench/ab.py); `pairs`: the default number of pairs (at least
    the method's minimum)."""
    return (
        flag("--pairs", type=int, default=pairs or MIN_PAIRS, help=f"alternated A/B pairs of windows (≥ {MIN_PAIRS})"),
        flag(
            "--order",
            choices=ORDERS,
            default="alternate",
            help="first side of each pair: alternate (A B, B A, …) or random (seeded by --seed, recorded)",
        ),
    )


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _ints(text: str) -> list[int]:
    return [int(t) for t in _csv(text)]


def _logging(config) -> None:
    from slca.logs import setup_logging

    setup_logging(config.common.log_level)


def _bench_queue(args, config) -> int:
    from ops.bench.queue.main import run_queue_bench

    return run_queue_bench(args, config)


def _bench_learner_memory(args, config) -> int:
    from ops.bench.learner_memory import run_learner_memory

    if args.a_set is None and args.b_set is None:
        args.a_set, args.b_set = ["learner.gradient_checkpointing=false"], ["learner.gradient_checkpointing=true"]
    args.a_set, args.b_set = args.a_set or [], args.b_set or []
    return run_learner_memory(args, config)


def _bench_sft_memory(args, config) -> int:
    from ops.bench.sft_memory import run_sft_memory

    if args.a_set is None and args.b_set is None:
        args.a_set = ["learner.sft_gradient_checkpointing=false"]
        args.b_set = ["learner.sft_gradient_checkpointing=true"]
    args.a_set, args.b_set = args.a_set or [], args.b_set or []
    return run_sft_memory(args, config)


def _bench_shape_rss(args, config) -> int:
    from ops.bench.shape_rss import run_shape_rss

    return run_shape_rss(args, config)


def _bench_swap(args, config) -> int:
    from ops.bench.swap.main import run_bench_swap

    _logging(config)
    return run_bench_swap(args, config)


def _bench_swap_compare(args, config) -> int:
    from ops.bench.swap.compare import run_compare

    return run_compare(args)


def _bench_table(args, config) -> int:
    from ops.bench.table import run_table

    return run_table(args, Path(__file__).resolve().parents[2])


def _bench_soak(args, config) -> int:
    from ops.bench.soak.main import run_soak

    _logging(config)
    return run_soak(args, config)


def _bench_rl(args, config) -> int:
    from ops.bench.rl.main import run_rl_bench

    _logging(config)
    return run_rl_bench(args, config)


def _bench_learn_vs_trl(args, config) -> int:
    from ops.bench.learn_vs_trl.main import run_block

    _logging(config)
    return run_block(args, config)


def _fixed_heap(config) -> None:
    from learner.settings import LearnerSettings
    from slca.heap import fix_mmap_threshold

    fix_mmap_threshold(config.get(LearnerSettings).heap_mmap_threshold_kib)


def _bench_sft(args, config) -> int:
    from ops.bench.sft import run_sft_bench
    from ops.experiments.warmstart.data import load_demonstrations

    _fixed_heap(config)  # the same heap as `slca sft` (slca/heap.py): both loops' memory returns between windows
    return run_sft_bench(args, config, load_demonstrations(config, args.pack, "train", args.seed))


def _bench_serve(args, config) -> int:
    from ops.bench.serve import run_serve_bench
    from serve.settings import ServeSettings
    from slca.cli import CliError

    common = config.common
    if not common.model_path().is_dir():
        raise CliError(f"model directory not found: {common.model_path()}")
    return run_serve_bench(config.get(ServeSettings), common, args)


def _bench_first_hour(args, config) -> int:
    from ops.bench.first_hour import run_first_hour

    return run_first_hour(args, config)


def _bench_learner(args, config) -> int:
    from ops.bench.learner_step import run_bench_cli

    _fixed_heap(config)  # as `slca learn`
    return run_bench_cli(args, config)


def _bench_logprob_gap(args, config) -> int:
    from ops.bench.logprob_gap import run_logprob_gap

    return run_logprob_gap(args, config)


def _bench_gpu_check(args, config) -> int:
    from ops.bench.gpu_check import run

    return run(args, config.common.cache_dir)


@dataclass(frozen=True)
class Bench:
    """One `slca bench <name>` subcommand: its help, its handler `(args, config) -> int` and its flags in `--help`
    order."""

    name: str
    help: str
    handler: Callable[..., int]
    flags: tuple[Flag | Adder, ...] = ()


BENCHES = (
    Bench(
        "queue",
        "stream producer and consumers vs redis-benchmark, scored trajectories/s",
        _bench_queue,
        (
            flag("--trajectories", type=int, default=4000, help="trajectories for the end-to-end run"),
            flag("--stream-entries", type=int, default=100000, help="entries for the raw stream run"),
            flag("--producer-entries", type=int, default=5000, help="trajectories per producer run (3 rounds)"),
            flag("--producer-only", action="store_true", help="measure the producer only"),
            flag("--workers", type=int, default=1, help="Celery worker processes in the end-to-end run"),
            flag("--out", help="directory for results.json + table.txt (or a .json file)"),
        ),
    ),
    Bench(
        "rl",
        "TRL's GRPOTrainer vs slca's online pipeline: same model, tasks, wall time",
        _bench_rl,
        (
            flag("--minutes", type=float, default=10.0, help="wall time of each window (one side, one pair)"),
            flag("--pairs", type=int, default=3, help="alternated TRL/slca pairs of windows (≥ 3; both sides)"),
            flag("--order", choices=("alternate", "random"), default="alternate", help="first side of each pair"),
            flag("--seed", type=int, default=0, help="draws the order with --order random (recorded)"),
            flag("--model", help="warm-started model (default: the sft model, else embedded with a warning)"),
            flag("--pack", default="everyday", help="task pack (train split)"),
            flag("--group-size", type=int, default=8),
            flag("--max-new-tokens", type=int, default=None, help="tokens per completion (default 128)"),
            flag("--sides", default="trl,slca", help="which sides to run (comma-separated)"),
            flag(
                "--max-turns",
                type=int,
                default=None,
                help="slca: model turns per episode (default 1: as TRL's completions)",
            ),
            flag(
                "--as-shipped",
                action="store_true",
                help="slca as `slca up` ships it: gradient checkpointing and the probe on, the feed's turns × tokens "
                "(3 × 192; TRL's completions get the same token budget) — throughput and memory in one run",
            ),
            flag(
                "--arms",
                default=None,
                metavar="ABLATION,…",
                help="ablations measured beside TRL and slca in the same blocks (each arm once per block, --pairs "
                "blocks): slca-share-prefix-off, trl-is-off (vLLM generation only), trl-spg4, or all",
            ),
            flag(
                "--trl-generation",
                choices=TRL_GENERATIONS,
                default=None,
                help="TRL's generation: transformers' generate or its vLLM colocate mode (default: the one on the "
                "pipeline's serve.engine — hf for hf, vllm-colocate for vllm; a different one is refused)",
            ),
            flag(
                "--pipeline-set",
                action="append",
                default=[],
                metavar="SECTION.FIELD=VALUE",
                help="extra setting for the slca pipeline only (e.g. serve.engine=hf)",
            ),
            flag(
                "--out",
                type=Path,
                default=Path("bench/rl/latest"),
                help="results.json + table.md here; the same command with the same --out resumes an interrupted run",
            ),
        ),
    ),
    Bench(
        "swap",
        "hot-swap under load: swap latency, failed requests, mixed-version share",
        _bench_swap,
        (
            flag("--versions", type=int, default=20, help="versions published, ≥ 20 (perturbed copies of the weights)"),
            flag("--interval-s", type=float, default=12.0, help="seconds between two publishes"),
            flag("--clients", type=int, default=8, help="concurrent agent-run clients (plus one canary)"),
            flag("--max-tokens", type=int, default=48, help="max tokens per agent run"),
            flag("--warmup-s", type=float, default=5.0, help="load before the first publish"),
            flag("--noise", type=float, default=0.002, help="per-version noise, × each tensor's std"),
            flag(
                "--core-process",
                action=argparse.BooleanOptionalAction,
                default=None,
                help="vLLM engine core in its own process (default: serve.vllm_engine_core_process)",
            ),
            flag("--out", type=Path, default=Path("bench/swap/latest")),
        ),
    ),
    Bench(
        "swap-compare",
        "serve's RSS growth per swap, two settings side by side, from alternated `slca bench swap` runs",
        _bench_swap_compare,
        (
            flag("runs", nargs="+", type=Path, help="directories of `slca bench swap` runs (results.json)"),
            flag("--by", default="serve_heap_trim_after_swap", help="the results key that tells the arms apart"),
            flag("--out", type=Path, required=True),
        ),
    ),
    Bench(
        "shape-rss",
        "serve's RSS under new batch shapes: oneDNN's default primitive cache vs serve.onednn_primitive_cache",
        _bench_shape_rss,
        (
            shape_rss_arguments,
            flag("--b-capacity", type=int, default=64, help="side B's cache entries (A: oneDNN's 1024)"),
            flag("--pairs", type=int, default=3, help="alternated A/B pairs (≥ 3)"),
            flag("--out", type=Path, help="write results.json + table.md here"),
        ),
    ),
    Bench(
        "learner-memory",
        "a learner step's peak RSS and trained tokens/s under two settings (default: without and with "
        "gradient checkpointing), alternated fresh processes",
        _bench_learner_memory,
        (
            learner_memory_arguments,
            flag(
                "--a-set",
                action="append",
                default=None,
                metavar="learner.FIELD=VALUE",
                help="side A's settings (default learner.gradient_checkpointing=false)",
            ),
            flag(
                "--b-set",
                action="append",
                default=None,
                metavar="learner.FIELD=VALUE",
                help="side B: A's settings and these (default learner.gradient_checkpointing=true)",
            ),
            flag("--pairs", type=int, default=3, help="alternated A/B pairs (≥ 3)"),
            flag("--out", type=Path, help="write results.json + table.md here"),
        ),
    ),
    Bench(
        "sft-memory",
        "the warm start's (`slca sft`) peak RSS and trained tokens/s under two settings (default: without and with "
        "gradient checkpointing), alternated fresh processes of the real command",
        _bench_sft_memory,
        (
            flag("--steps", type=int, default=3, help="`slca sft --steps` per window"),
            flag("--seed", type=int, default=0, help="`slca sft --seed`: the same batches in every window"),
            flag(
                "--a-set",
                action="append",
                default=None,
                metavar="SECTION.FIELD=VALUE",
                help="side A's settings (default learner.sft_gradient_checkpointing=false)",
            ),
            flag(
                "--b-set",
                action="append",
                default=None,
                metavar="SECTION.FIELD=VALUE",
                help="side B: A's settings and these (default learner.sft_gradient_checkpointing=true)",
            ),
            flag("--pairs", type=int, default=3, help="alternated A/B pairs (≥ 3)"),
            flag("--out", type=Path, help="write results.json + table.md here"),
        ),
    ),
    Bench(
        "soak",
        "minutes of legal + hostile traffic against `slca up`: memory flat, 0 × 5xx, "
        "/healthz p99 < 100 ms, every legal request answered, every hostile case held",
        _bench_soak,
        (
            flag("--minutes", type=float, default=10.0, help="the measured window"),
            flag(
                "--warmup-minutes",
                type=float,
                default=1.0,
                help="load before the measured window, at least (it goes on until the system is steady)",
            ),
            flag(
                "--learner-warmup-max-minutes",
                type=float,
                default=40.0,
                help="the warm-up goes on until serve serves a version the learner published meanwhile (its model "
                "and optimizer state allocated), at most this long; then the window begins anyway and the soak "
                "fails (never steady). On an empty model cache the warm start trains first (≈ 6 min) and the "
                "probe's baseline of it holds the feed (one engine per process; the base model's took 1,118 s under "
                "the soak's load on 2 cores, 2026-12-06): 20 minutes was too short for `make soak` on a fresh "
                "machine",
            ),
            flag("--clients", type=int, default=4, help="legal clients (chat and agent runs, alternating)"),
            flag("--hostile-interval-s", type=float, default=0.5, help="at most one hostile body this often"),
            flag(
                "--cases-every-minutes",
                type=float,
                default=5.0,
                help="a round of the hostile cases (ops/bench/soak/cases.py), each judged held, this often from the "
                "measured window's start (0: none)",
            ),
            flag(
                "--url",
                help="attach to the `slca up` serving here (loopback; state from common.data_dir) "
                "instead of starting one on a temporary data directory",
            ),
            flag("--out", type=Path, help="write results.md (verdict first) and results.json here"),
        ),
    ),
    Bench("learn-vs-trl", LEARN_VS_TRL_HELP, _bench_learn_vs_trl, LEARN_VS_TRL_FLAGS),
    Bench(
        "table",
        "the README's performance table from the committed bench/*/ab results",
        _bench_table,
        (flag("--write", action="store_true", help="rewrite the table's block in README.md (else print it)"),),
    ),
    Bench(
        "sft",
        "warm-start loop: fixed padded batches (old) vs length-grouped (new), tokens/s, "
        "alternated windows on one fixed example list (ops/bench/ab.py)",
        _bench_sft,
        (
            flag("--model", default="embedded", help="model dir or 'embedded'/'tiny' (default embedded)"),
            flag(
                "--steps",
                type=int,
                default=10,
                help="old-loop steps per window (≥ 10): the fixed list holds steps × learner.sft_batch demonstrations",
            ),
            flag("--seconds", type=float, default=0.0, help="repeat the pass while a window is shorter (0: one pass)"),
            *_ab_args(),
            flag("--warmup", type=int, default=1, help="untimed steps per loop before the first pair (default 1)"),
            flag("--batch-tokens", type=int, default=0, help="new loop's token budget (0: as `slca sft`)"),
            flag("--pack", default="everyday", help="task pack for demonstrations"),
            flag("--seed", type=int, default=0, help="draws the example list, the new plan and a random order"),
            flag("--out", default=None, help="write the results as JSON here (and .md beside it)"),
        ),
    ),
    Bench(
        "serve",
        "tokens/s, TTFT: slca's chat and agent APIs ÷ vLLM's own OpenAI server "
        "(configured as slca's engine), alternated windows (ops/bench/ab.py)",
        _bench_serve,
        (
            flag(
                "--targets",
                type=_csv,
                default=["slca-vllm-core", "slca-vllm-inproc", "slca-hf"],
                help="comma-separated slca targets, each compared with the baseline",
            ),
            flag("--baseline", default="vllm-server", help="the A side of every comparison (default vLLM's server)"),
            flag(
                "--comparisons",
                type=_csv,
                default=["chat-stream", "chat-whole", "agent"],
                help="chat-stream (both streamed), chat-whole (both not), agent (recorded runs vs whole chat)",
            ),
            flag("--clients", type=_ints, default=[1, 16, 64], help="concurrent clients per level"),
            flag("--hf-clients", type=_ints, default=[1, 16], help="levels for the (slow) hf reference engine"),
            flag("--min-requests", type=int, default=4, help="requests per wave: max(clients, this)"),
            flag("--waves", type=int, default=3, help="waves per window at least"),
            flag("--window-s", type=float, default=120.0, help="seconds per window at least (default 2 minutes)"),
            flag(
                "--prompts",
                choices=("tools", "short"),
                default="tools",
                help="tools: tool schemas in the system prompt and a multi-turn history (ops/bench/serve/prompts.py); "
                "short: eight short questions",
            ),
            flag(
                "--agent-turns",
                type=int,
                default=3,
                help="agent comparison: model turns per run at most (tool calls between)",
            ),
            *_ab_args(pairs=6),
            flag("--seed", type=int, default=0, help="seed of --order random (recorded)"),
            flag("--max-tokens", type=int, default=64, help="max tokens per request"),
            flag("--out", type=Path, help="write table.md and results.json here (e.g. bench/serve/latest)"),
        ),
    ),
    Bench(
        "first-hour",
        "`slca up` from its launch: seconds to a first answer, the warm start's swap, a first step",
        _bench_first_hour,
        (
            flag("--out", type=Path, default=Path("bench/first-hour/latest"), help="results.json + results.md"),
            flag("--timeout-minutes", type=float, default=60.0, help="give up after this long without a step"),
            flag("--poll-s", type=float, default=1.0, help="seconds between looks"),
        ),
    ),
    Bench(
        "learner",
        "training tokens/s of one step; slca vs grpo advantage overhead",
        _bench_learner,
        (
            flag("--groups", type=int, default=2, help="groups per step"),
            flag("--group-size", type=int, default=8),
            flag("--tokens", type=int, default=128, help="generated tokens per member"),
            flag("--model", default=None, help="model (default common.model)"),
            flag("--repeats", type=int, default=3),
        ),
    ),
    Bench(
        "logprob-gap",
        "|behaviour logprob gap|: vLLM (bf16, as served) vs a transformers fp32 recompute of the same tokens",
        _bench_logprob_gap,
        (
            flag("--model", default=None, help="model dir or 'embedded'/'tiny' (default common.model)"),
            flag("--prompts", type=int, default=8),
            flag("--max-tokens", type=int, default=64),
        ),
    ),
    Bench(
        "gpu-check",
        "the hf engine (bf16 vs the CPU's fp32, tokens/s, a hot swap) and the learner's step on CUDA, no Redis or "
        "vLLM; without CUDA a CPU smoke run (also `python -m ops.bench.gpu_check`)",
        _bench_gpu_check,
        (gpu_check_arguments,),
    ),
)
"""The subcommands, in `slca bench --help` order."""


def register(bench) -> None:
    for b in BENCHES:
        parser = add_flags(bench.add_parser(b.name, help=b.help), b.flags)
        parser.set_defaults(func=_stopping_on_sigterm(b.handler))
