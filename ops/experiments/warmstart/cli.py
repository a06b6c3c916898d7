"""`slca sft`: demonstrations from the sim (`ops.experiments.warmstart.data`) into the learner's warm
start (`learner.sft`; `slca bench sft` is `ops.bench.sft`). Heavy imports inside the handlers."""

from __future__ import annotations

import sys
import threading


def register(commands, bench) -> None:
    sft = commands.add_parser("sft", help="warm start on task-pack demonstrations (loss on assistant tokens)")
    sft.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="time budget (default ops.warm_start_minutes, what `slca up` spends)",
    )
    sft.add_argument("--steps", type=int, default=0, help="step budget (0: until --minutes; either ends it)")
    sft.add_argument(
        "--min-steps",
        type=int,
        default=0,
        help="--minutes ends training only after this many steps (0: no floor; a loaded machine still trains enough)",
    )
    sft.add_argument("--out", default=None, help="output dir (default <cache>/models/<model>-sft)")
    sft.add_argument("--model", default=None, help="model dir or 'embedded'/'tiny' (default common.model)")
    sft.add_argument("--pack", default="everyday", help="task pack for demonstrations")
    sft.add_argument("--eval-tasks", type=int, default=50, help="held-out tasks for the before/after check (0: skip)")
    sft.add_argument("--seed", type=int, default=0)
    sft.add_argument(
        "--batch-tokens",
        type=int,
        default=0,
        help="padded tokens per length-grouped batch (0: learner.sft_batch × mean demonstration length)",
    )
    sft.add_argument(
        "--publish",
        action="store_true",
        help="then hand the model to the running system: the next weight version (signed, announced), promoted for "
        "callers; progress in <data_dir>/warm-start.json and Redis (what `slca up` runs beside serving)",
    )
    sft.add_argument("--serve-url", help="with --publish: serve's base URL (default: ops.feed_url, else serve's port)")
    sft.add_argument(
        "--candidate-url",
        help="with --publish: the candidate replica's base URL, which must serve the version too (default: "
        "serve-candidate's with ops.candidate_replica; none without)",
    )
    # a service: `slca up` stops it like the others (status 0, nothing written), also while it imports torch
    sft.set_defaults(func=_sft, service=True)


def _sft(args, config) -> int:
    from learner.interrupt import StepInterrupted
    from learner.settings import LearnerSettings
    from learner.sft import run_sft
    from ops.experiments.warmstart.beside import WarmStartStopped, run_beside
    from ops.experiments.warmstart.data import load_demonstrations, load_pack
    from ops.experiments.warmstart.model import warm_model_dir
    from ops.settings import OpsSettings
    from slca.early_stop import stop_once
    from slca.heap import bound_onednn_cache, fix_mmap_threshold
    from slca.logs import setup_logging

    fix_mmap_threshold(config.get(LearnerSettings).heap_mmap_threshold_kib)
    bound_onednn_cache(config.get(LearnerSettings).onednn_primitive_cache)  # lengths vary from batch to batch
    if args.minutes is None:  # one default for the stage `slca up` runs and the command a person types
        args.minutes = config.get(OpsSettings).warm_start_minutes

    stopping = threading.Event()

    def train(on_step, on_phase=None) -> int:
        demos = load_demonstrations(config, args.pack, "train", args.seed)
        held_out = load_pack(args.pack, "test", args.seed)[: max(0, args.eval_tasks)]
        return run_sft(args, config, demos, held_out, on_step, on_phase, stopping.is_set)

    def on_stop() -> None:
        stopping.set()  # a step's layer hooks see it (a backward runs no Python but those hooks)
        _raise_stopped()

    stop_once(on_stop)
    try:
        if not args.publish:
            return train(None)
        setup_logging(config.common.log_level)  # its progress lines go to the log `slca up` keeps
        if args.out is None:
            args.out = str(warm_model_dir(config))
        return run_beside(args, config, train)
    except (WarmStartStopped, StepInterrupted):
        print("slca sft: stopped; no model written by this run", file=sys.stderr)
        return 0


def _raise_stopped() -> None:
    from ops.experiments.warmstart.beside import WarmStartStopped

    raise WarmStartStopped()
