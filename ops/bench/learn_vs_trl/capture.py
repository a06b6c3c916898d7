"""slca's model at the marks: the newest complete published version when the mark passes, taken while
`slca train` goes on publishing.

The clock starts when the parent launches `slca train` (the same clock as TRL's side, `ops.bench.rl.trl_marks`), so
its start-up — the model, the in-process server — is paid as TRL's is. At mark m the parent links the newest
complete version (a `v<N>` directory with its manifest) into `<arm>/checkpoints/<m>/v<N>/`: the weights as they were
at the last step end at or before m (never after: TRL's side may be one step late, which favours TRL). With no
version published yet, the checkpoint is the warm start (version 0).

The race: the learner keeps the newest `weights.keep_versions` versions (the recipe pins 2) and deletes older ones
as it publishes. A version can vanish while it is linked; then the link is dropped and the then-newest version
taken (it was published after the mark, so the checkpoint records the seconds it was taken at).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from slca.cli import CliError

POLL_S = 2.0
"""How often the parent looks at the clock and the child while it waits for a mark."""
TRIES = 5
"""Versions that may vanish under one capture before it gives up (each is a version published meanwhile)."""


@dataclass(frozen=True)
class Captured:
    """One checkpoint of slca's arm."""

    minutes: float
    version: int
    """The version linked (its step: `slca train` publishes v<step>); 0: the warm start, nothing published yet."""
    elapsed_s: float
    """Seconds on the arm's clock when it was taken."""
    ended_early: bool = False
    """`slca train` had exited (cleanly) before the mark: its last version stands for the mark."""

    def to_dict(self) -> dict:
        return asdict(self)


class ChildFailed(Exception):
    def __init__(self, status: int):
        super().__init__(f"exited with status {status}")
        self.status = status


def newest_version(weights_dir: Path) -> Path | None:
    """The newest complete version (`recipe.last_version`), None when nothing is published yet."""
    from ops.experiments.learning.recipe import last_version

    try:
        return last_version(weights_dir)
    except CliError:
        return None


def complete(version_dir: Path) -> bool:
    """Every file the version's manifest names is there, the manifest too (a version half deleted is not)."""
    from slca.contracts import WeightManifest
    from slca.contracts.weights import MANIFEST_NAME

    try:
        manifest = WeightManifest.model_validate_json((version_dir / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return False
    return all((version_dir / name).is_file() for name in manifest.sha256)


def snapshot_newest(weights_dir: Path, target_parent: Path, tries: int = TRIES) -> Path | None:
    """Link the newest complete version under `weights_dir` into `target_parent/v<N>/`; its path, or None when none
    is published. A version pruned meanwhile is dropped and the newest one then taken."""
    from ops.experiments.learning.files import link_tree

    for _ in range(tries):
        source = newest_version(weights_dir)
        if source is None:
            return None
        target = target_parent / source.name
        shutil.rmtree(target, ignore_errors=True)
        try:
            link_tree(source, target)
        except FileNotFoundError:
            continue  # pruned while linked: `link_tree` left nothing behind
        if complete(target):
            return target
        shutil.rmtree(target)  # pruned between listing and linking: some files never came
    raise CliError(f"{weights_dir}: {tries} versions vanished while being taken; is another learner pruning it?")


def capture_marks(
    proc,
    weights_dir: Path,
    marks: list[float],
    checkpoints_dir: Path,
    clock_start: float,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Captured]:
    """Wait for each mark (minutes after `clock_start`, ascending) and take the newest version then; a child
    (`proc`, a `Popen`) that exits early with status 0 has its last version stand for the marks left, one that fails
    raises `ChildFailed`."""
    taken = []
    for m in marks:
        while clock() - clock_start < m * 60 and proc.poll() is None:
            sleep(min(POLL_S, max(0.0, clock_start + m * 60 - clock())))
        status = proc.poll()
        if status:
            raise ChildFailed(status)
        got = snapshot_newest(weights_dir, checkpoints_dir / f"{m:g}")
        version = int(got.name[1:]) if got is not None else 0
        taken.append(Captured(m, version, round(clock() - clock_start, 1), ended_early=status is not None))
    return taken
