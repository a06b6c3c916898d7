"""`slca config show`: print the effective configuration (defaults < file < env < --set); `slca config reference`:
every setting's key, type, default and documentation, from the settings classes (`slca.settings_reference`; it
writes `docs/settings.md`)."""

from __future__ import annotations

import json


def register(commands, bench) -> None:
    config = commands.add_parser("config", help="configuration")
    sub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = sub.add_parser("show", help="print the effective configuration")
    show.add_argument("--format", choices=["toml", "json"], default="toml")
    show.set_defaults(func=_show)
    ref = sub.add_parser(
        "reference", help="every setting: key, type, default, documentation (from the settings classes)"
    )
    ref.add_argument("--format", choices=["md", "json"], default="md")
    ref.add_argument("--write", metavar="PATH", help="write it to PATH (e.g. docs/settings.md) instead of printing it")
    ref.add_argument(
        "--check", action="store_true", help="with --write: change nothing, exit 1 when PATH is not up to date"
    )
    ref.set_defaults(func=_reference)


def _toml_value(v) -> str:
    return json.dumps(v)  # JSON scalars and arrays are valid TOML for our value types


def _show(args, cfg) -> int:
    data = cfg.effective()
    if args.format == "json":
        print(json.dumps(data, indent=2))
        return 0
    print(f"# source: {cfg.source or 'defaults + environment'}")
    for section, values in data.items():
        print(f"\n[{section}]")
        for key, value in values.items():
            if value is None:
                print(f"# {key} = (unset)")
            elif isinstance(value, dict):
                print(f"{key} = {{ {', '.join(f'{k} = {_toml_value(x)}' for k, x in value.items())} }}")
            else:
                print(f"{key} = {_toml_value(value)}")
    return 0


def _reference(args, cfg) -> int:
    from pathlib import Path

    from slca.cli import CliError
    from slca.settings_reference import REGENERATE, reference, render

    text = render(args.format)
    if not args.write:
        if args.check:
            raise CliError("--check needs --write PATH (the file to compare)")
        print(text, end="")
        return 0
    path = Path(args.write)
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    if current == text:
        print(f"{path}: up to date")
        return 0
    if args.check:
        print(f"{path}: out of date with the settings classes; regenerate it: {REGENERATE}")
        return 1
    missing = reference()[1]
    if missing:  # a page written here would lack their sections
        raise CliError(f"not written: the packages of sections {', '.join(missing)} are not installed")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"{path}: written")
    return 0
