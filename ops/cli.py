"""`slca up | status | score | feed | eval` and `slca bench learning | rl | swap | soak …` (heavy imports inside the
handlers)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ops.eval.cli import add_bench_arguments as add_bench_eval_arguments
from ops.eval.cli import add_eval_arguments
from ops.learning.cli import add_arguments as add_learning_arguments


def register(commands, bench) -> None:
    up = commands.add_parser("up", help="the whole system: Redis (if none configured), API, workers, learner, feed")
    up.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)")
    up.set_defaults(func=_up)

    status = commands.add_parser("status", help="processes, queue depths, served version, recent rewards")
    status.add_argument("--window", type=int, default=50, help="recent rewards to average")
    status.set_defaults(func=_status)

    score = commands.add_parser("score", help="HierR reward of one answer (JSON on stdin: pack, split, task_id, "
                                              "calls, reply), every component shown")  # fmt: skip
    score.add_argument("--indent", type=int, help="indent the JSON printed (default: one line)")
    score.set_defaults(func=_score)

    feed = commands.add_parser("feed", help="drive training traffic through the agent API from a task pack")
    feed.add_argument("--url", help="agent API base URL (default: ops.feed_url, else serve's host:port)")
    feed.add_argument("--pack", help="task pack (default: ops.feed_pack)")
    feed.add_argument("--requests", type=int, help="stop after this many requests (default: ops.feed_requests; 0: forever)")
    feed.add_argument("--concurrency", type=int, help="requests in flight (default: ops.feed_concurrency)")
    feed.add_argument("--ids-out", type=Path, help="append every recorded trajectory id to this file")
    feed.set_defaults(func=_feed)

    ev = commands.add_parser("eval", help="held-out task splits and BFCL through one server; `eval compare A B`")
    add_eval_arguments(ev)
    ev.set_defaults(func=_eval)

    online = bench.add_parser("online", help="reward per served version of the running (or last) `slca up`")
    online.add_argument("--out", type=Path, default=Path("bench/online/latest"))
    online.add_argument("--command", help="the command that produced the run, recorded in results.json")
    online.add_argument("--note", help="free text recorded with the curve (machine, load average …)")
    online.set_defaults(func=_bench_online)

    bench_eval = bench.add_parser("eval", help="the default evaluation's speed: items/s per suite, total seconds")
    add_bench_eval_arguments(bench_eval)
    bench_eval.set_defaults(func=_bench_eval)

    learning = bench.add_parser("learning", help="slca vs grpo vs toolpo vs rltr, one warm start, seeds")
    add_learning_arguments(learning)
    learning.set_defaults(func=_bench_learning)

    queue = bench.add_parser("queue", help="stream producer and consumers vs redis-benchmark, scored trajectories/s")
    queue.add_argument("--trajectories", type=int, default=4000, help="trajectories for the end-to-end run")
    queue.add_argument("--stream-entries", type=int, default=100000, help="entries for the raw stream run")
    queue.add_argument("--producer-entries", type=int, default=5000, help="trajectories per producer run (3 rounds)")
    queue.add_argument("--producer-only", action="store_true", help="measure the producer only")
    queue.add_argument("--workers", type=int, default=1, help="Celery worker processes in the end-to-end run")
    queue.add_argument("--out", help="directory for results.json + table.txt (or a .json file)")
    queue.set_defaults(func=_bench_queue)

    rl = bench.add_parser("rl", help="TRL's GRPOTrainer vs slca's online pipeline: same model, tasks, wall time")
    rl.add_argument("--minutes", type=float, default=10.0, help="wall time of each side")
    rl.add_argument("--model", help="warm-started model (default: the sft model, else embedded with a warning)")
    rl.add_argument("--pack", default="everyday", help="task pack (train split)")
    rl.add_argument("--group-size", type=int, default=8)
    rl.add_argument("--max-new-tokens", type=int, default=128)
    rl.add_argument("--sides", default="trl,slca", help="which sides to run (comma-separated)")
    rl.add_argument("--max-turns", type=int, default=1, help="slca: model turns per episode (1: as TRL's completions)")
    rl.add_argument("--pipeline-set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                    help="extra setting for the slca pipeline only (e.g. serve.engine=hf)")
    rl.add_argument("--out", type=Path, default=Path("bench/rl/latest"))
    rl.set_defaults(func=_bench_rl)

    swap = bench.add_parser("swap", help="hot-swap under load: swap latency, failed requests, mixed-version share")
    swap.add_argument("--versions", type=int, default=5, help="versions published (perturbed copies of the weights)")
    swap.add_argument("--interval-s", type=float, default=12.0, help="seconds between two publishes")
    swap.add_argument("--clients", type=int, default=8, help="concurrent agent-run clients (plus one canary)")
    swap.add_argument("--max-tokens", type=int, default=48, help="max tokens per agent run")
    swap.add_argument("--warmup-s", type=float, default=5.0, help="load before the first publish")
    swap.add_argument("--noise", type=float, default=0.002, help="per-version noise, × each tensor's std")
    swap.add_argument("--core-process", action=argparse.BooleanOptionalAction, default=None,
                      help="vLLM engine core in its own process (default: serve.vllm_engine_core_process)")
    swap.add_argument("--out", type=Path, default=Path("bench/swap/latest"))
    swap.set_defaults(func=_bench_swap)

    soak = bench.add_parser("soak", help="minutes of legal + hostile traffic against `slca up`: memory flat, 0 × 5xx, "
                                         "/healthz p99 < 100 ms, every legal request answered")  # fmt: skip
    soak.add_argument("--minutes", type=float, default=10.0, help="the measured window")
    soak.add_argument("--warmup-minutes", type=float, default=1.0, help="load before the measured window")
    soak.add_argument("--clients", type=int, default=4, help="legal clients (chat and agent runs, alternating)")
    soak.add_argument("--hostile-interval-s", type=float, default=0.5, help="at most one hostile body this often")
    soak.add_argument("--url", help="attach to the `slca up` serving here (loopback; state from common.data_dir) "
                                    "instead of starting one on a temporary data directory")  # fmt: skip
    soak.add_argument("--out", type=Path, help="write results.md (verdict first) and results.json here")
    soak.set_defaults(func=_bench_soak)


def _logging(config) -> None:
    logging.basicConfig(level=config.common.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def _up(args, config) -> int:
    from ops.supervisor.up import run_up

    _logging(config)
    return run_up(args, config)


def _status(args, config) -> int:
    from ops.status_cmd import run_status

    return run_status(args, config)


def _score(args, config) -> int:
    from ops.score import run_score

    return run_score(args, config)


def _bench_online(args, config) -> int:
    from ops.status_cmd import run_online_export

    return run_online_export(args, config)


def _feed(args, config) -> int:
    from ops.feed.main import run_feed

    _logging(config)
    return run_feed(args, config)


def _eval(args, config) -> int:
    from ops.eval.main import run_eval

    _logging(config)
    return run_eval(args, config)


def _bench_eval(args, config) -> int:
    from ops.eval.bench import run_bench_eval

    _logging(config)
    return run_bench_eval(args, config)


def _bench_learning(args, config) -> int:
    from ops.learning.main import run_bench_learning

    _logging(config)
    return run_bench_learning(args, config)


def _bench_queue(args, config) -> int:
    from ops.bench.queue import run_queue_bench

    return run_queue_bench(args, config)


def _bench_swap(args, config) -> int:
    from ops.bench.swap import run_bench_swap

    _logging(config)
    return run_bench_swap(args, config)


def _bench_soak(args, config) -> int:
    from ops.bench.soak import run_soak

    _logging(config)
    return run_soak(args, config)


def _bench_rl(args, config) -> int:
    from ops.bench.rl import run_rl_bench

    _logging(config)
    return run_rl_bench(args, config)
