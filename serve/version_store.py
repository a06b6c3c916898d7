"""Where a weight version's files are on this machine, and whether they verify (docs/design.md#versions).

A pin, a promotion or a restart names a version by number; this finds its directory — the learner's
`<data_dir>/weights/vN/`, the kept copies of promoted versions `<data_dir>/promoted-weights/vN/`, or the weight
follower's mirror (`weights.mirror_dir`) — and checks it as a swap by path is checked (`ManifestPolicy`: the
directory's manifest signed with `weights.key` and of that version; every listed file against its sha256).
v0 is the base model (`common.model`), which has no manifest: engines start with it.

A version found in none of them is fetched, when the store has a `RemoteVersions` (`weights.url` with a transport
that fetches over HTTP: `http`, `auto`), from the learner's weight server into `<mirror>/fetched/vN/` through that
transport (`slca.weights.fetch_by_number`: the manifest must pass the policy as an announcement does, then the
follower's fetch hashes every file against it) — so a promoted replica on another host, which follows no
announcements, still finds what it is asked to promote. Cannot be fetched: 404; refused: 422; nothing kept.

`keep(versions)` hard-links those versions' files under `promoted-weights/` (a copy where links cannot cross
devices): the learner prunes `weights/` to its last `weights.keep_versions`, and a version callers get, or may roll
back to, must outlive that. Files of a published version never change, so a link is as good as a copy. Fetched
copies of other versions than those and the ones engines hold are then removed.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serve.errors import EngineUnavailable, ServeError
from slca.atomic import temp_dir_next_to
from slca.redaction import redact_url
from slca.weights import FetchError, ManifestPolicy, WeightLoadError, WeightVersion, fetch_by_number
from slca.weights.fetch_report import REFUSING

log = logging.getLogger(__name__)

KEPT_DIR = "promoted-weights"
HELD_DIR = "held-weights"
"""The version the candidate is held at while the gate judges it (serve/version_hold.py), hard-linked so the
learner's pruning cannot remove it before the gate promotes it (one version: the next hold replaces it)."""
FETCHED_DIR = "fetched"
"""Under the mirror: versions fetched by number (apart from the follower's copies, which it prunes to the one it
serves)."""


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


@dataclass(frozen=True)
class RemoteVersions:
    """Where versions missing on this machine are fetched from: the learner's weight server at `base_url`
    (`weights.url`), through `transport` (a server's transport built from `[weights]` that fetches over HTTP, its
    mirror directory `<mirror>/fetched`)."""

    transport: Any
    base_url: str
    into: Path


class VersionStore:
    def __init__(
        self, data_dir: Path, policy: ManifestPolicy, mirror: Path | None = None, remote: RemoteVersions | None = None
    ) -> None:
        self.policy = policy
        self.weights = data_dir / "weights"
        self.kept = data_dir / KEPT_DIR
        self.held = data_dir / HELD_DIR
        self.remote = remote
        fetched = remote.into if remote is not None else None
        self.dirs = [d for d in (self.weights, self.kept, self.held, mirror, fetched) if d is not None]
        self._fetching = threading.Lock()  # one fetch at a time (two pins of one version must not race on its copy)

    def find(self, version: int) -> Path | None:
        """The first directory holding `v<version>/` with a manifest, or None."""
        for root in self.dirs:
            path = root / f"v{version}"
            if (path / "manifest.json").is_file():
                return path
        return None

    def exists(self, version: int) -> bool:
        """On this machine, or possibly fetchable (`remote`: only the fetch tells)."""
        return version == 0 or self.remote is not None or self.find(version) is not None

    def resolve(self, version: int) -> WeightVersion | None:
        """The verified version (None: v0, the base model), fetched first when it is not on this machine and the
        store has a `remote`. Blocking (hashes every file, may download): run it off the loop. Raises
        VersionNotFound or VersionUnverified."""
        if version == 0:
            return None
        path = self.find(version)
        if path is None and self.remote is None:
            raise VersionNotFound(
                f"weight version v{version} does not exist on this server (never published, or pruned)"
            )
        if not self.policy.key and not self.policy.allow_unsigned:
            raise VersionUnverified(f"v{version}: no weights.key to verify it with")
        if path is None:
            with self._fetching:
                path = self.find(version)  # fetched meanwhile
                if path is None:
                    return self._fetch(version)
        try:
            manifest = self.policy.signed_on_disk(str(path), version)
            weights = WeightVersion(str(path), version, manifest)
            weights.check()
        except WeightLoadError as exc:
            raise VersionUnverified(f"v{version} fails verification: {exc}") from None
        return weights

    def _fetch(self, version: int) -> WeightVersion:
        """`version` from the learner's weight server (the follower's fetch and checks); 404 when it cannot be
        fetched, 422 when what came is refused."""
        remote = self.remote
        assert remote is not None
        where = redact_url(remote.base_url)
        try:
            weights = fetch_by_number(remote.transport, remote.base_url, version, self.policy)
        except FetchError as exc:
            if exc.reason in REFUSING:  # the bytes sent do not match the signed manifest
                raise VersionUnverified(f"v{version} fetched from {where} fails verification: {exc}") from None
            raise VersionNotFound(
                f"weight version v{version} is not on this server, and fetching it from {where} failed: {exc}"
            ) from None
        except WeightLoadError as exc:
            raise VersionUnverified(f"v{version} fetched from {where} fails verification: {exc}") from None
        log.info("fetched v%s from %s into %s", version, where, weights.root)
        return weights

    def keep_held(self, version: int) -> None:
        """Hard-link `version`'s files under `held-weights/` (its only version: others there are dropped), so that
        the version a judge holds can still be promoted after the learner pruned it. Nothing to link for v0 or a
        version not on disk (the promotion then finds it, or not, as before)."""
        source = next(
            (
                d / f"v{version}"
                for d in self.dirs
                if d != self.held and (d / f"v{version}" / "manifest.json").is_file()
            ),
            None,
        )
        self.held.mkdir(parents=True, exist_ok=True)
        for path in self.held.iterdir():
            if path.is_dir() and path.name != f"v{version}":
                shutil.rmtree(path, ignore_errors=True)
        final = self.held / f"v{version}"
        if version > 0 and source is not None and not final.exists():
            _link_tree(source, final)

    def keep(self, versions: set[int], held: set[int] = frozenset()) -> None:
        """Hard-link `versions` (v0 aside) under `promoted-weights/`; drop the kept copies of any other version, and
        the fetched copies of any version neither kept nor `held` (in an engine: a rebuild loads it back)."""
        self.kept.mkdir(parents=True, exist_ok=True)
        sources = [self.weights] + ([self.remote.into] if self.remote is not None else [])
        for version in sorted(v for v in versions if v > 0):
            final = self.kept / f"v{version}"
            source = next((d / f"v{version}" for d in sources if (d / f"v{version}" / "manifest.json").is_file()), None)
            if final.exists() or source is None:
                continue
            try:
                _link_tree(source, final)
            except OSError as exc:
                log.warning("could not keep a copy of v%s under %s: %s", version, self.kept, exc)
        for path in self.kept.iterdir():
            if path.is_dir() and path.name.startswith("v") and path.name[1:].isdigit():
                if int(path.name[1:]) not in versions:
                    shutil.rmtree(path, ignore_errors=True)
        if self.remote is not None and self._fetching.acquire(blocking=False):  # not under a fetch in progress
            try:
                self.remote.transport.retain(set(versions) | set(held))
            finally:
                self._fetching.release()


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
