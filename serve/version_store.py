"""Where a weight version's files are on this machine, and whether they verify (docs/design.md#versions).

A pin, a promotion or a restart names a version by number; this finds its directory — the learner's
`<data_dir>/weights/vN/`, the kept copies of promoted versions `<data_dir>/promoted-weights/vN/`, or the weight
follower's mirror (`weights.mirror_dir`) — and checks it as a swap by path is checked (`ManifestPolicy`: the
directory's manifest signed with `weights.key` and of that version; every listed file against its sha256).
v0 is the base model (`common.model`), which has no manifest: engines start with it.

`keep(versions)` hard-links those versions' files under `promoted-weights/` (a copy where links cannot cross
devices): the learner prunes `weights/` to its last `weights.keep_versions`, and a version callers get, or may roll
back to, must outlive that. Files of a published version never change, so a link is as good as a copy.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from serve.errors import EngineUnavailable, ServeError
from slca.atomic import temp_dir_next_to
from slca.weights import ManifestPolicy, WeightLoadError, WeightVersion

log = logging.getLogger(__name__)

KEPT_DIR = "promoted-weights"


class VersionNotFound(ServeError):
    """A pin or a promotion naming a version this server cannot find (never published, or pruned)."""

    status = 404
    code = "version_not_found"


class VersionUnverified(ServeError):
    """A version whose files do not verify (signature, version, checksums): never loaded."""

    status = 422
    code = "version_unverified"


class VersionBusy(EngineUnavailable):
    """Every engine for pinned versions is answering another pin: retry shortly."""

    code = "pin_engines_busy"


class OneEngineOnly(ServeError):
    """The engine holds one model per process (`Engine.one_per_process`): no second engine for another version."""

    status = 409
    type = "invalid_request_error"
    code = "one_engine_per_process"


class VersionStore:
    def __init__(self, data_dir: Path, policy: ManifestPolicy, mirror: Path | None = None) -> None:
        self.policy = policy
        self.weights = data_dir / "weights"
        self.kept = data_dir / KEPT_DIR
        self.dirs = [d for d in (self.weights, self.kept, mirror) if d is not None]

    def find(self, version: int) -> Path | None:
        """The first directory holding `v<version>/` with a manifest, or None."""
        for root in self.dirs:
            path = root / f"v{version}"
            if (path / "manifest.json").is_file():
                return path
        return None

    def exists(self, version: int) -> bool:
        return version == 0 or self.find(version) is not None

    def resolve(self, version: int) -> WeightVersion | None:
        """The verified version (None: v0, the base model). Blocking (hashes every file): run it off the loop.
        Raises VersionNotFound or VersionUnverified."""
        if version == 0:
            return None
        path = self.find(version)
        if path is None:
            raise VersionNotFound(
                f"weight version v{version} does not exist on this server (never published, or pruned)"
            )
        if not self.policy.key and not self.policy.allow_unsigned:
            raise VersionUnverified(f"v{version}: no weights.key to verify it with")
        try:
            manifest = self.policy.signed_on_disk(str(path), version)
            weights = WeightVersion(str(path), version, manifest)
            weights.check()
        except WeightLoadError as exc:
            raise VersionUnverified(f"v{version} fails verification: {exc}") from None
        return weights

    def keep(self, versions: set[int]) -> None:
        """Hard-link `versions` (v0 aside) under `promoted-weights/`; drop the kept copies of any other version."""
        self.kept.mkdir(parents=True, exist_ok=True)
        for version in sorted(v for v in versions if v > 0):
            final = self.kept / f"v{version}"
            source = self.weights / f"v{version}"
            if final.exists() or not (source / "manifest.json").is_file():
                continue
            try:
                _link_tree(source, final)
            except OSError as exc:
                log.warning("could not keep a copy of v%s under %s: %s", version, self.kept, exc)
        for path in self.kept.iterdir():
            if path.is_dir() and path.name.startswith("v") and path.name[1:].isdigit():
                if int(path.name[1:]) not in versions:
                    shutil.rmtree(path, ignore_errors=True)


def _link_tree(source: Path, final: Path) -> None:
    tmp = temp_dir_next_to(final)
    try:
        for item in source.iterdir():
            if item.is_file():
                try:
                    os.link(item, tmp / item.name)
                except OSError:
                    shutil.copy2(item, tmp / item.name)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
