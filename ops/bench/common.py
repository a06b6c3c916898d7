"""Helpers every bench shares: the command line a result records, a model's name, percentiles of samples."""

from __future__ import annotations

from slca.heap import own_memory_mib  # noqa: F401  (the benches' import of it)

import math
import re
import shlex
from pathlib import Path


def bench_command(name: str, argv: list[str]) -> str:
    """`slca bench <name> …` as a user would type it: without the `--out` directory, and any other absolute path
    argument (`--model /home/me/models/warm`, `--pipeline-set common.model=/x/m`) cut to `…/<its last part>`
    (results carry no machine paths; `ops.bench.ab.write` refuses them)."""
    rest = argv[argv.index(name) + 1 :] if name in argv else []
    kept, skip = [], False
    for a in rest:
        if skip or a.startswith("--out="):
            skip = False
            continue
        skip = a == "--out"
        if not skip:
            kept.append(_no_path(a))
    return " ".join(["slca bench", name, *map(_shell_word, kept)])


def _shell_word(arg: str) -> str:
    """`arg` as a shell reads it back as one word: quoted when it holds spaces, braces, quotes (a JSON setting such
    as `ops.process_threads={"serve": 1}`); plain words and the `…/<last part>` of a cut path stay as they are."""
    return arg if re.fullmatch(r"[\w@%+=:,./…~-]+", arg) else shlex.quote(arg)


def _no_path(arg: str) -> str:
    key, eq, value = arg.rpartition("=") if "=" in arg else ("", "", arg)
    if value.startswith(("/", "~")) and len(value) > 1:
        value = "…/" + (Path(value).name or "")
    return f"{key}{eq}{value}"


def model_name(path: str | Path) -> str:
    """What a result says about a model: its directory's name, never its path."""
    return Path(str(path)).expanduser().name or str(path)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of the values; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]
