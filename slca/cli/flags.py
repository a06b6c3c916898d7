"""Command-line flags as data: a command's flags written as a module-level table of `Flag` rows that one loop adds
to its parser, rather than a function of one `add_argument` call per flag, which the formatter unrolls to a line per
keyword (issue 39: such functions went past 60 lines while holding no logic)."""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flag:
    """One `parser.add_argument(*names, **options)` call."""

    names: tuple[str, ...]
    options: Mapping[str, Any]


def flag(*names: str, **options: Any) -> Flag:
    """A `Flag` written as the `add_argument` call it stands for."""
    return Flag(names, options)


Adder = Callable[[argparse.ArgumentParser], None]
"""A function that adds flags of its own (a module's `add_arguments`), in a table beside `Flag` rows."""


def add_flags(parser: argparse.ArgumentParser, flags: Iterable[Flag | Adder]) -> argparse.ArgumentParser:
    """Add `flags` to `parser` in order (the order of `--help`)."""
    for row in flags:
        if isinstance(row, Flag):
            # a copy: a table lives as long as the module, and a mutable default (`default=[]` with `append`) must
            # not be shared between the parsers built from it, as it was not when each call wrote its own
            parser.add_argument(*row.names, **copy.deepcopy(dict(row.options)))
        else:
            row(parser)
    return parser
