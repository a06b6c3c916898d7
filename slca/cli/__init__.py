"""The `slca` command: one entry point; each component plugs its own subcommands in.

A component names a `register(commands, bench)` function in a `slca.cli` entry point (`pyproject.toml`), where
`commands` and `bench` are argparse sub-parser collections (top level and `slca bench ...`). Handlers are set
with `set_defaults(func=...)` and receive `(args, config)`. CLI modules must import heavy libraries (torch,
vllm) inside handlers only, so that `slca --help` stays fast. This package names no component: it registers its
own commands (`config`, `model`) and whatever the installed entry points bring.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import EntryPoint, entry_points

from slca.early_stop import StoppedBeforeStart, install, release
from slca.config import ConfigError, load_config

CLI_GROUP = "slca.cli"
"""Entry-point group through which components register their subcommands."""

OWN_CLIS = ("slca.cli.config_cmd", "slca.models.cli")
"""This package's own commands (`slca config`, `slca model`)."""


class CliError(RuntimeError):
    """A user-facing error: printed as one line, exit status 2, no traceback."""


class _Parser(argparse.ArgumentParser):
    """An unknown command also says which components could not be loaded (it may be one of theirs)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.missing: dict[str, str] = {}
        """Entry-point name → why it could not be loaded (its package is not installed)."""

    def error(self, message: str):
        if self.missing and "invalid choice" in message:
            absent = "; ".join(f"{name} ({why})" for name, why in self.missing.items())
            message += f" — components not installed: {absent}"
        elif not self.missing and "invalid choice" in message and not entry_points(group=CLI_GROUP):
            message += (
                f" — no component is registered ({CLI_GROUP} entry points): install the project "
                "(`pip install -e .`) so that its entry points are known"
            )
        super().error(message)


def _load(ep: EntryPoint, missing: dict[str, str]):
    """The entry point's `register`, or None when its package is not installed (recorded in `missing`)."""
    try:
        return ep.load()
    except ModuleNotFoundError as exc:
        root = ep.value.split(":")[0]
        if exc.name and (root == exc.name or root.startswith(exc.name + ".")):
            missing[ep.name] = f"no module {exc.name!r}"
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="slca", description="Serve tool-calling agents and train them online.")
    parser.add_argument("--config", help="TOML configuration file (default: $SLCA_CONFIG or ./slca.toml)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", help="override a setting (repeatable)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    bench_parser = commands.add_parser("bench", help="side-by-side benchmarks (ratios in one run)")
    bench = bench_parser.add_subparsers(dest="bench", metavar="BENCH")
    bench_parser.set_defaults(func=lambda args, cfg: bench_parser.print_help() or 2)
    for module_name in OWN_CLIS:
        __import__(module_name, fromlist=["register"]).register(commands, bench)
    missing: dict[str, str] = {}
    for ep in sorted(entry_points(group=CLI_GROUP), key=lambda e: e.name):
        register = _load(ep, missing)
        if register is not None:
            register(commands, bench)
    parser.missing = missing
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the `slca` script (`python -m slca` has installed it before its imports)
        install()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "service", False):
            release()  # only a service treats a stop during its start-up as clean (early_stop.py)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        config = load_config(args.config, args.set)
        rc = args.func(args, config)
    except (CliError, ConfigError, FileNotFoundError) as exc:
        print(f"slca: error: {exc}", file=sys.stderr)
        return 2
    except StoppedBeforeStart as stop:
        return stop.report()
    except KeyboardInterrupt:
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
