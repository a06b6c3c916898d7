"""Atomic directory and file writes: write into a temp path next to the target, fsync, rename.

A reader (the server loading vN, a restarting learner) sees either nothing or a complete directory, never a
half-written one; a crash leaves only a `.tmp-*` directory that the next run removes."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: Path) -> None:
    for f in path.iterdir():
        if f.is_file():
            with open(f, "rb+") as fh:
                os.fsync(fh.fileno())
    fsync_dir(path)


def temp_dir_next_to(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=target.parent))


def commit_dir(tmp: Path, target: Path) -> None:
    """fsync `tmp` and rename it to `target` (which must not exist)."""
    fsync_tree(tmp)
    os.rename(tmp, target)
    fsync_dir(target.parent)


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def remove_stale_temps(parent: Path) -> None:
    if parent.is_dir():
        for p in parent.glob(".tmp-*"):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
