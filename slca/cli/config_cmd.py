"""`slca config show`: print the effective configuration (defaults < file < env < --set)."""

from __future__ import annotations

import json


def register(commands, bench) -> None:
    config = commands.add_parser("config", help="configuration")
    sub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = sub.add_parser("show", help="print the effective configuration")
    show.add_argument("--format", choices=["toml", "json"], default="toml")
    show.set_defaults(func=_show)


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
