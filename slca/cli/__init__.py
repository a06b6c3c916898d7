"""The `slca` command: one entry point; each component registers its own subcommands.

A component's `cli` module exposes `register(commands, bench)` where `commands` and `bench` are argparse
sub-parser collections (top level and `slca bench ...`). Handlers are set with `set_defaults(func=...)`
and receive `(args, config)`. CLI modules must import heavy libraries (torch, vllm) inside handlers only,
so that `slca --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from slca.config import ConfigError, load_config

COMPONENT_CLIS = (
    "slca.cli.config_cmd",
    "slca.models.cli",
    "serve.cli",
    "sim.cli",
    "workers.cli",
    "learner.cli",
    "ops.cli",
    "ops.experiments.cli",
    "ops.warmstart.cli",
)


class CliError(RuntimeError):
    """A user-facing error: printed as one line, exit status 2, no traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slca", description="Serve tool-calling agents and train them online.")
    parser.add_argument("--config", help="TOML configuration file (default: $SLCA_CONFIG or ./slca.toml)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", help="override a setting (repeatable)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    bench_parser = commands.add_parser("bench", help="side-by-side benchmarks (ratios in one run)")
    bench = bench_parser.add_subparsers(dest="bench", metavar="BENCH")
    bench_parser.set_defaults(func=lambda args, cfg: bench_parser.print_help() or 2)
    for module_name in COMPONENT_CLIS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # component not built yet
            raise
        module.register(commands, bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        config = load_config(args.config, args.set)
        rc = args.func(args, config)
    except (CliError, ConfigError, FileNotFoundError) as exc:
        print(f"slca: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
