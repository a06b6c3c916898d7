"""`slca learn`, `slca sft`, `slca bench learner`, `slca bench sft` (heavy imports inside handlers).

`slca train` (the controlled run that drives serve, sim and workers) is ops' (`ops.experiments.cli`)."""

from __future__ import annotations

import argparse


def register(commands, bench) -> None:
    learn = commands.add_parser("learn", help="the online learner: groups from Redis → SLCA-GRPO steps → weights")
    learn.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in total")
    learn.add_argument("--estimator", default=None, help="advantage estimator (default: learner.estimator)")
    learn.set_defaults(func=_learn)

    sft = commands.add_parser("sft", help="warm start on task-pack demonstrations (loss on assistant tokens)")
    sft.add_argument("--minutes", type=float, default=10.0, help="time budget (default 10)")
    sft.add_argument("--steps", type=int, default=0, help="step budget (0: until --minutes)")
    sft.add_argument("--out", default=None, help="output dir (default <cache>/models/<model>-sft)")
    sft.add_argument("--model", default=None, help="model dir or 'embedded'/'tiny' (default common.model)")
    sft.add_argument("--pack", default="everyday", help="task pack for demonstrations")
    sft.add_argument("--eval-tasks", type=int, default=50, help="held-out tasks for the before/after check (0: skip)")
    sft.add_argument("--seed", type=int, default=0)
    sft.add_argument("--batch-tokens", type=int, default=0,
                     help="padded tokens per length-grouped batch (0: learner.sft_batch × mean demonstration length)")
    sft.set_defaults(func=_sft)

    b = bench.add_parser("learner", help="training tokens/s of one step; slca vs grpo advantage overhead")
    b.add_argument("--groups", type=int, default=2, help="groups per step")
    b.add_argument("--group-size", type=int, default=8)
    b.add_argument("--tokens", type=int, default=128, help="generated tokens per member")
    b.add_argument("--model", default=None, help="model (default common.model)")
    b.add_argument("--repeats", type=int, default=3)
    b.set_defaults(func=_bench)

    bs = bench.add_parser("sft", help="warm-start loop: fixed padded batches (old) vs length-grouped (new), tokens/s")
    bs.add_argument("--model", default="embedded", help="model dir or 'embedded'/'tiny' (default embedded)")
    bs.add_argument("--seconds", type=float, default=120.0, help="timed seconds per loop (default 120)")
    bs.add_argument("--steps", type=int, default=0, help="steps per loop instead of --seconds (0: use --seconds)")
    bs.add_argument("--warmup", type=int, default=1, help="untimed steps before each loop (default 1)")
    bs.add_argument("--batch-tokens", type=int, default=0, help="new loop's token budget (0: as `slca sft`)")
    bs.add_argument("--pack", default="everyday", help="task pack for demonstrations")
    bs.add_argument("--seed", type=int, default=0)
    bs.add_argument("--out", default=None, help="write the results as JSON here")
    bs.set_defaults(func=_bench_sft)


def _learn(args: argparse.Namespace, config) -> int:
    import logging
    import threading
    from pathlib import Path
    import signal

    import redis
    from prometheus_client import start_http_server

    from learner.loop import LoopContext, run_dir_of, run_learner
    from learner.metrics import LearnerMetrics
    from learner.settings import LearnerSettings

    logging.basicConfig(level=config.common.log_level, format="%(asctime)s %(name)s %(message)s")
    settings = config.get(LearnerSettings)
    updates = {k: v for k, v in (("max_steps", args.max_steps), ("estimator", args.estimator)) if v is not None}
    settings = settings.model_copy(update=updates)
    check_estimator(settings.estimator)
    common = config.common
    run_dir = run_dir_of(settings, common)
    run_dir.mkdir(parents=True, exist_ok=True)
    model_dir = Path(settings.init_model).expanduser() if settings.init_model else common.model_path()
    if not (model_dir / "config.json").is_file():
        from slca.cli import CliError

        raise CliError(f"model not found: {model_dir} (run `slca model fetch`, or set learner.init_model)")
    if settings.metrics_port:
        start_http_server(settings.metrics_port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ctx = LoopContext(settings, common, redis.Redis.from_url(common.redis_or_default()), run_dir,
                      Path(common.data_dir) / "weights", model_dir, LearnerMetrics.create(), stop)  # fmt: skip
    try:
        state = run_learner(ctx)
    except redis.ConnectionError as exc:
        from slca.cli import CliError

        raise CliError(f"cannot reach Redis at {common.redis_or_default()}: {exc}") from None
    print(f"learner stopped at step {state.step}, version {state.version}, {len(state.consumed)} groups consumed")
    return 0


def check_estimator(name: str) -> None:
    """A CLI error naming the known estimators when `name` is not registered."""
    from learner.advantages import UnknownEstimatorError, get_estimator
    from slca.cli import CliError

    try:
        get_estimator(name)
    except UnknownEstimatorError as exc:
        raise CliError(str(exc)) from None


def _sft(args, config) -> int:
    from learner.sft import run_sft_cli

    return run_sft_cli(args, config)


def _bench(args, config) -> int:
    from learner.bench import run_bench_cli

    return run_bench_cli(args, config)


def _bench_sft(args, config) -> int:
    from learner.sft_bench import run_sft_bench_cli

    return run_sft_bench_cli(args, config)
