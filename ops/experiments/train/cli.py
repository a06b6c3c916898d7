"""`slca train`: the controlled synchronous run (heavy imports inside the handler)."""

from __future__ import annotations


def register(commands, bench) -> None:
    train = commands.add_parser("train", help="controlled synchronous run: generate, score, update, publish")
    train.add_argument("--estimator", required=True, help="slca | grpo | toolpo | rltr")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--steps", type=int, default=20)
    train.add_argument("--api", default=None, help="base URL of a running `slca serve` (default: start one in-process)")
    train.add_argument("--pack", default="everyday", help="task pack")
    train.add_argument(
        "--log", default=None, help="JSON-lines metrics file (default <run_dir>/train-<estimator>-<seed>.jsonl)"
    )
    train.set_defaults(func=_train)


def _train(args, config) -> int:
    from learner.cli import check_estimator
    from ops.experiments.train.controlled import run_train_cli

    check_estimator(args.estimator)
    return run_train_cli(args, config)
