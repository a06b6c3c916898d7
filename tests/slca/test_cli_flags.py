"""`slca.cli.flags`: a table of flags adds what the `add_argument` calls it stands for add, in order."""

from __future__ import annotations

import argparse

from slca.cli.flags import add_flags, flag

TABLE = (
    flag("--name", default="x", help="a name"),
    lambda p: p.add_argument("--own", type=int, default=3),
    flag("--set", action="append", default=[], metavar="K=V"),
)


def test_flags_and_adders_are_added_in_table_order_with_their_options():
    p = add_flags(argparse.ArgumentParser(), TABLE)
    assert [a.dest for a in p._actions] == ["help", "name", "own", "set"]
    args = p.parse_args(["--own", "4", "--set", "a=1"])
    assert (args.name, args.own, args.set) == ("x", 4, ["a=1"])
    assert p._actions[3].metavar == "K=V" and p._actions[1].help == "a name"


def test_a_mutable_default_in_a_table_is_not_shared_between_parsers():
    first, second = add_flags(argparse.ArgumentParser(), TABLE), add_flags(argparse.ArgumentParser(), TABLE)
    first.parse_args([]).set.append("changed")
    assert second.parse_args([]).set == [] and TABLE[2].options["default"] == []
