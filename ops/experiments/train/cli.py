"""`slca train`: the controlled synchronous run (heavy imports inside the handler)."""

from __future__ import annotations

TOOL_SOURCES = ("real", "sgls")
"""`slca train --tools`: `real` (each tool as the task offers it) or `sgls` (every tool simulated)."""


def register(commands, bench) -> None:
    train = commands.add_parser("train", help="controlled synchronous run: generate, score, update, publish")
    train.add_argument("--estimator", help="any registered advantage estimator (required; see --list-estimators)")
    train.add_argument("--list-estimators", action="store_true", help="print the registered estimators and exit")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--steps", type=int, default=20, help="optimizer steps (0: stop on --minutes alone)")
    train.add_argument(
        "--minutes",
        type=float,
        default=0.0,
        help="stop after M minutes of wall clock from the first step (whichever of --steps and --minutes comes "
        "first; 0: no time limit)",
    )
    train.add_argument(
        "--tasks-file",
        default=None,
        help="train on these tasks only: JSON lines of Task (sim.tasks.write_jsonl), "
        "train split (default: the --pack's train split)",
    )
    train.add_argument(
        "--task-ids", default=None, help="comma-separated task ids: train on these of the training tasks only"
    )
    train.add_argument(
        "--tools",
        choices=TOOL_SOURCES,
        default="real",
        help="who answers the rollouts' tool calls: real (each tool as the task offers it: the pack's real tools run "
        "for real) or sgls (every tool offered as simulated: SGLS, with the configured [sim] settings, answers all)",
    )
    train.add_argument("--api", default=None, help="base URL of a running `slca serve` (default: start one in-process)")
    train.add_argument("--pack", default="everyday", help="task pack")
    train.add_argument(
        "--log", default=None, help="JSON-lines metrics file (default <run_dir>/train-<estimator>-<seed>.jsonl)"
    )
    train.set_defaults(func=_train)


def _train(args, config) -> int:
    from learner.cli import check_estimator, print_estimators
    from ops.experiments.train.controlled import run_train_cli
    from slca.cli import CliError

    if args.list_estimators:
        return print_estimators()
    if not args.estimator:
        raise CliError("--estimator is required (the registered ones: slca train --list-estimators)")
    check_estimator(args.estimator)
    return run_train_cli(args, config)
