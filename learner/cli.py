"""`slca learn` (heavy imports inside handlers); `slca bench learner` is ops' (ops/bench/learner_step.py).

The commands that feed the learner from other components are ops': `slca train` (`ops.experiments.train.cli`: the
controlled run through serve and workers), `slca sft` (`ops.experiments.warmstart.cli`: demonstrations from the sim) and
`slca bench sft` (`ops.bench.sft`)."""

from __future__ import annotations

import argparse


def register(commands, bench) -> None:
    learn = commands.add_parser("learn", help="the online learner: groups from Redis → SLCA-GRPO steps → weights")
    learn.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in total")
    learn.add_argument(
        "--estimator", default=None, help="any registered advantage estimator (default: learner.estimator)"
    )
    learn.add_argument("--list-estimators", action="store_true", help="print the registered estimators and exit")
    learn.set_defaults(func=_learn, service=True)


def _learn(args: argparse.Namespace, config) -> int:
    import os
    from pathlib import Path

    if args.list_estimators:
        return print_estimators()
    # first, before the heavy imports and the model load: a stop asked for at any point is a clean stop
    stop = stop_on_signals()

    import redis
    from prometheus_client import start_http_server

    from learner.loop import LoopContext, is_main_rank, run_dir_of, run_learner
    from learner.metrics import LearnerMetrics
    from learner.settings import LearnerSettings
    from slca.heap import bound_onednn_cache, fix_mmap_threshold
    from slca.logs import setup_logging
    from slca.models.paths import find_model_dir, how_to_make
    from slca.weights import WeightsSettings

    setup_logging(config.common.log_level)
    settings = config.get(LearnerSettings)
    fix_mmap_threshold(settings.heap_mmap_threshold_kib)
    bound_onednn_cache(settings.onednn_primitive_cache)  # before the model's first matmul
    updates = {k: v for k, v in (("max_steps", args.max_steps), ("estimator", args.estimator)) if v is not None}
    settings = settings.model_copy(update=updates)
    check_estimator(settings.estimator)
    common = config.common
    run_dir = run_dir_of(settings, common)
    run_dir.mkdir(parents=True, exist_ok=True)
    name = settings.init_model or common.model
    model_dir = find_model_dir(name, common.cache_dir, hint=f"{how_to_make(name)}, or set learner.init_model")
    if settings.metrics_port and is_main_rank():  # rank 0 reports the steps; one port per host is free anyway
        start_http_server(settings.metrics_port)
    weights = config.get(WeightsSettings)
    weights_dir = Path(common.data_dir) / "weights"
    transport = learner_transport(weights, weights_dir, is_main_rank())
    ctx = LoopContext(
        settings,
        common,
        redis.Redis.from_url(common.redis_or_default()),
        run_dir,
        weights_dir,
        model_dir,
        LearnerMetrics.create(),
        stop,
        transport,
        weights,
    )
    try:
        state = run_learner(ctx)
    except redis.ConnectionError as exc:
        if stop.is_set():  # Redis went first while we were stopping: nothing unapplied was acknowledged
            print(f"learner stopped; Redis went away meanwhile ({exc}); unacknowledged groups stay pending")
            return 0
        from slca.cli import CliError

        raise CliError(f"cannot reach Redis at {common.redis_or_default()}: {exc}") from None
    finally:
        transport.close()
    if not is_main_rank():
        print(f"learner rank {os.environ.get('RANK')} stopped at step {state.step} (rank 0 reports the groups)")
        return 0
    print(f"learner stopped at step {state.step}, version {state.version}, {state.dropped_stale} stale groups dropped")
    return 0


def learner_transport(weights, weights_dir, main_rank: bool = True):
    """How servers reach the published versions, connected: the transport registered as `weights.transport` (the
    disk, or HTTP on `weights.bind`). Only rank 0 publishes: another rank gets the disk's, which serves nothing."""
    from slca.cli import CliError
    from slca.weights import LearnerOptions, for_learner

    mode, options = weights.transport, LearnerOptions(weights_dir, weights.bind, weights.url, weights.key)
    if not main_rank:
        mode, options = "disk", LearnerOptions(weights_dir)
    try:
        transport = for_learner(mode, options)
        transport.connect()
    except (OSError, ValueError) as exc:  # the address is taken, names no host servers could reach, or is missing
        raise CliError(
            f"cannot publish the weights (weights.transport={mode}, weights.bind={options.bind}): {exc}"
        ) from None
    return transport


def stop_on_signals():
    """An event set by SIGTERM (`slca up`'s stop) and SIGINT (a terminal's Ctrl-C, which reaches every process of
    the foreground group): the loop finishes at its next check, no KeyboardInterrupt traceback, exit status 0."""
    import threading

    from slca.early_stop import stop_once

    stop = threading.Event()
    stop_once(stop.set)  # later signals ignored: one during the interpreter's teardown must not kill a clean stop
    return stop


def estimator_lines() -> list[str]:
    """One line per registered advantage estimator: its name and the first line of its docstring."""
    from learner.advantages import ESTIMATORS

    width = max(map(len, ESTIMATORS), default=0)
    return [
        f"{name:{width}}  {((fn.__doc__ or '').strip().splitlines() or [''])[0]}" for name, fn in ESTIMATORS.items()
    ]


def print_estimators() -> int:
    print("\n".join(estimator_lines()))
    return 0


def check_estimator(name: str) -> None:
    """A CLI error naming the known estimators when `name` is not registered."""
    from learner.advantages import UnknownEstimatorError, get_estimator
    from slca.cli import CliError

    try:
        get_estimator(name)
    except UnknownEstimatorError as exc:
        raise CliError(str(exc)) from None
