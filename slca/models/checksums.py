"""A checksum file beside a model directory's files: makes fetch idempotent and detects corruption."""

from __future__ import annotations

import json
from pathlib import Path

from slca.contracts.weights import sha256_file

CHECKSUMS = "slca-checksums.json"


def write_checksums(directory: Path, extra: dict | None = None) -> dict[str, str]:
    files = sorted(p for p in directory.iterdir() if p.is_file() and p.name != CHECKSUMS)
    sums = {p.name: sha256_file(p) for p in files}
    (directory / CHECKSUMS).write_text(json.dumps({"files": sums, **(extra or {})}, indent=2))
    return sums


def verify_checksums(directory: Path) -> bool:
    """True when the directory holds a checksum file and every listed file matches it."""
    f = directory / CHECKSUMS
    if not f.is_file():
        return False
    try:
        sums = json.loads(f.read_text())["files"]
    except (json.JSONDecodeError, KeyError):
        return False
    return all((directory / name).is_file() and sha256_file(directory / name) == h for name, h in sums.items())
