"""`slca up | status | score | feed | eval` and `slca bench online | eval | learning`, each handled in its room
(`ops.run`, `ops.observe`, `ops.experiments`); the benches of ops/bench (`slca bench serve | learner | sft | queue |
rl | swap | soak | logprob-gap`) register through `ops.bench.cli`; `slca train` and `slca sft` through their own
entry points (`ops.experiments.train.cli`, `ops.experiments.warmstart.cli`). Heavy imports inside the handlers."""

from __future__ import annotations

from pathlib import Path

from ops.bench.cli import register as register_benches
from ops.experiments.eval.cli import add_bench_arguments as add_bench_eval_arguments
from ops.experiments.eval.cli import add_eval_arguments
from ops.experiments.learning.cli import add_arguments as add_learning_arguments
from ops.experiments.learning.cli import add_recipe_arguments
from ops.run.gate.cli import add_promote_arguments


def register(commands, bench) -> None:
    up = commands.add_parser("up", help="the whole system: Redis (if none configured), API, workers, learner, feed")
    up.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)")
    up.set_defaults(func=_up)

    status = commands.add_parser("status", help="processes, queue depths, served version, recent rewards")
    status.add_argument("--window", type=int, default=50, help="recent rewards to average")
    status.set_defaults(func=_status)

    score = commands.add_parser(
        "score",
        help="HierR reward of one answer (JSON on stdin: pack, split, task_id, calls, reply), every component shown",
    )
    score.add_argument("--indent", type=int, help="indent the JSON printed (default: one line)")
    score.set_defaults(func=_score)

    feed = commands.add_parser("feed", help="drive training traffic through the agent API from a task pack")
    feed.add_argument(
        "--url",
        help="agent API base URL (default: ops.feed_url, else serve-candidate's with ops.candidate_replica, else "
        "serve's host:port)",
    )
    feed.add_argument("--pack", help="task pack (default: ops.feed_pack)")
    feed.add_argument(
        "--requests", type=int, help="stop after this many requests (default: ops.feed_requests; 0: forever)"
    )
    feed.add_argument("--concurrency", type=int, help="requests in flight (default: ops.feed_concurrency)")
    feed.add_argument("--ids-out", type=Path, help="append every recorded trajectory id to this file")
    feed.set_defaults(func=_feed, service=True)

    gate = commands.add_parser("gate", help="the promotion gate: judge each due candidate, tell serve to promote")
    gate.add_argument("--url", help="serve's base URL (default: ops.feed_url, else serve's host:port)")
    gate.add_argument(
        "--candidate-url",
        help="the candidate replica's base URL, where the candidate is judged (default: serve-candidate's with "
        "ops.candidate_replica, else --url)",
    )
    gate.set_defaults(func=_gate, service=True)

    promote = commands.add_parser("promote", help="the version callers get: --to vN, or --rollback (admin token)")
    add_promote_arguments(promote)
    promote.set_defaults(func=_promote)

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

    learning = bench.add_parser("learning", help="the registered estimators compared: one warm start, seeds")
    add_learning_arguments(learning)
    learning.set_defaults(func=_bench_learning)

    recipe = bench.add_parser("recipe", help="the learning-recipe sweep, in blocks: every arm once per block")
    add_recipe_arguments(recipe)
    recipe.set_defaults(func=_bench_recipe)

    register_benches(bench)


def _logging(config) -> None:
    from slca.logs import setup_logging

    setup_logging(config.common.log_level)


def _up(args, config) -> int:
    from ops.run.supervisor.up import run_up

    _logging(config)
    return run_up(args, config)


def _status(args, config) -> int:
    from ops.run.status import run_status

    return run_status(args, config)


def _score(args, config) -> int:
    from ops.experiments.score import run_score

    return run_score(args, config)


def _bench_online(args, config) -> int:
    from ops.observe.online import run_online_export

    return run_online_export(args, config)


def _feed(args, config) -> int:
    from ops.run.feed.main import run_feed

    _logging(config)
    return run_feed(args, config)


def _gate(args, config) -> int:
    from ops.run.gate.cli import run_gate

    _logging(config)
    return run_gate(args, config)


def _promote(args, config) -> int:
    from ops.run.gate.cli import run_promote

    return run_promote(args, config)


def _eval(args, config) -> int:
    from ops.experiments.eval.main import run_eval

    _logging(config)
    return run_eval(args, config)


def _bench_eval(args, config) -> int:
    from ops.experiments.eval.bench import run_bench_eval

    _logging(config)
    return run_bench_eval(args, config)


def _bench_recipe(args, config) -> int:
    from ops.experiments.learning.recipe import run_block

    _logging(config)
    return run_block(args, config)


def _bench_learning(args, config) -> int:
    from ops.experiments.learning.main import run_bench_learning

    _logging(config)
    return run_bench_learning(args, config)
