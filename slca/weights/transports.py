"""Which transport each side uses, from configuration: the disk by default (one machine), HTTP when the learner is
given a bind address and when a server cannot read the announced directory (docs/design.md#weights)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from slca.contracts import WeightManifest
from slca.weights.disk import DiskTransport, TransportStats
from slca.weights.errors import WeightLoadError
from slca.weights.fetch_report import FetchObserver
from slca.weights.http import HttpTransport
from slca.weights.verify import WeightVersion

Mode = Literal["auto", "disk", "http"]


class AutoTransport:
    """A server's transport for `serve.weights_transport=auto`: the announced directory where this machine can read
    it, else its `url` (HTTP)."""

    name = "auto"

    def __init__(self, disk: DiskTransport, http: HttpTransport) -> None:
        self.disk, self.http = disk, http

    @property
    def stats(self) -> TransportStats:
        d, h = self.disk.stats, self.http.stats
        return TransportStats(d.fetches + h.fetches, d.bytes + h.bytes, d.seconds + h.seconds, d.failures + h.failures)

    def fetch(self, manifest: WeightManifest) -> WeightVersion:
        if self.disk.can_fetch(manifest):
            return self.disk.fetch(manifest)
        if self.http.can_fetch(manifest):
            return self.http.fetch(manifest)
        raise WeightLoadError(f"{manifest.path}: not a directory here, and v{manifest.version} announces no url")

    def retain(self, versions: set[int]) -> None:
        self.http.retain(versions)

    def close(self) -> None:
        pass


def for_learner(
    weights_dir: Path, bind: str | None = None, url: str | None = None, key: str | None = None
) -> DiskTransport | HttpTransport:
    """The learner's transport (not yet connected): HTTP on `bind` (`learner.weights_bind`) when set, else the disk."""
    if bind:
        return HttpTransport(weights_dir, bind=bind, url=url, key=key)
    return DiskTransport()


def for_server(
    mode: Mode = "auto",
    mirror_dir: Path | None = None,
    key: str | None = None,
    timeout_s: float = 60.0,
    max_bytes: int = 64 << 30,
    observer: FetchObserver | None = None,
) -> DiskTransport | HttpTransport | AutoTransport:
    """A server's transport (`serve.weights_transport`): `disk`, `http` (always fetched into `mirror_dir`), or
    `auto` (the disk where the announced directory exists here, else HTTP). `observer`: handed a `FetchReport` after
    every HTTP fetch (the disk transport moves nothing)."""
    if mode == "disk":
        return DiskTransport()
    http = HttpTransport(mirror_dir=mirror_dir, key=key, timeout_s=timeout_s, max_bytes=max_bytes, observer=observer)
    return http if mode == "http" else AutoTransport(DiskTransport(), http)
