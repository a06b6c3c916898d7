"""Warm-start data from the sim: a task pack's gold conversations executed against the simulator's tools, and
the held-out tasks the before/after check runs on. The learner receives them; it imports no sim."""

from __future__ import annotations

from slca.cli import CliError
from slca.config import Config
from slca.contracts import Task


def load_demonstrations(config: Config, pack: str, split: str, seed: int = 0) -> list[tuple[Task, list[dict]]]:
    """(task, gold conversation) for every task of the pack split; tools answer through the configured sim
    (the results a served episode would see)."""
    from sim import make_provider
    from sim.tasks import demonstration

    provider = make_provider(config.section("sim").with_cache_of(config.common), None)
    return [(task, demonstration(task, provider)) for task in load_pack(pack, split, seed)]


def load_pack(pack: str, split: str, seed: int = 0) -> list[Task]:
    """The pack's split; an unknown pack or split is a CLI error naming it."""
    from sim.tasks import load_tasks

    try:
        return load_tasks(pack, split, seed)
    except ValueError as exc:
        raise CliError(f"cannot load task pack {pack!r}: {exc}") from None
