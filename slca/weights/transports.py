"""One registry of weight transports: how an announced version reaches a server, by name (docs/design.md#weights).

A server's transport is `weights.transport` (`for_server`): each registered name maps to a factory of
`ServerOptions` (where fetched copies go, the key, the bounds, the fetch observer). The shipped ones: `disk` (read the
announced directory in place: one machine, or a shared filesystem), `http` (fetch the announced `url` into a verified
local copy), `auto` (the disk where the announced directory exists here, else HTTP). A new transport is a class with
a server's side (`fetch`, `retain`, `stats`, `close`) and one `@register_transport("name")` factory; an unknown name
is refused listing the registered ones. The learner's side follows from configuration, not a name: HTTP when
`weights.bind` is set, else the disk (`for_learner`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from slca.contracts import WeightManifest
from slca.weights.disk import DiskTransport, TransportStats
from slca.weights.errors import WeightLoadError
from slca.weights.fetch_report import FetchObserver
from slca.weights.http import HttpTransport
from slca.weights.verify import WeightVersion


class ServerTransport(Protocol):
    """A server's side of a transport: the announced version as a verified local `WeightVersion`."""

    name: str

    @property
    def stats(self) -> TransportStats: ...

    def fetch(self, manifest: WeightManifest) -> WeightVersion: ...

    def retain(self, versions: set[int]) -> None:
        """Keep local copies of `versions` only (those no longer served are removed)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ServerOptions:
    """What a server's transport may need (`weights.*`)."""

    mirror_dir: Path | None = None
    """Where fetched copies are kept (`weights.mirror_dir`)."""
    key: str | None = None
    """`weights.key`: an HTTP fetch carries the token derived from it."""
    timeout_s: float = 60.0
    max_bytes: int = 64 << 30
    observer: FetchObserver | None = None
    """Handed a `FetchReport` after every HTTP fetch (serve's `slca_weights_fetch_*` metrics)."""


class UnknownTransportError(ValueError):
    """A transport name that is not registered; the message lists the registered ones."""


TRANSPORTS: dict[str, Callable[[ServerOptions], ServerTransport]] = {}


def register_transport(name: str):
    """Register a server transport factory `(ServerOptions) -> ServerTransport` under `name`."""

    def deco(factory: Callable[[ServerOptions], ServerTransport]):
        if name in TRANSPORTS:
            raise ValueError(f"weight transport {name!r} registered twice")
        TRANSPORTS[name] = factory
        return factory

    return deco


def transport_names() -> list[str]:
    return sorted(TRANSPORTS)


def check_transport(name: str) -> str:
    """`name` when registered, else UnknownTransportError listing the registered ones."""
    if name not in TRANSPORTS:
        raise UnknownTransportError(f"unknown weight transport {name!r}; registered: {', '.join(transport_names())}")
    return name


class AutoTransport:
    """A server's transport for `weights.transport=auto`: the announced directory where this machine can read it,
    else its `url` (HTTP)."""

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


@register_transport("disk")
def _disk(options: ServerOptions) -> DiskTransport:
    return DiskTransport()


@register_transport("http")
def _http(options: ServerOptions) -> HttpTransport:
    return HttpTransport(
        mirror_dir=options.mirror_dir,
        key=options.key,
        timeout_s=options.timeout_s,
        max_bytes=options.max_bytes,
        observer=options.observer,
    )


@register_transport("auto")
def _auto(options: ServerOptions) -> AutoTransport:
    return AutoTransport(DiskTransport(), _http(options))


def for_learner(
    weights_dir: Path, bind: str | None = None, url: str | None = None, key: str | None = None
) -> DiskTransport | HttpTransport:
    """The learner's transport (not yet connected): HTTP on `bind` (`weights.bind`) when set, else the disk."""
    if bind:
        return HttpTransport(weights_dir, bind=bind, url=url, key=key)
    return DiskTransport()


def for_server(
    mode: str = "auto",
    mirror_dir: Path | None = None,
    key: str | None = None,
    timeout_s: float = 60.0,
    max_bytes: int = 64 << 30,
    observer: FetchObserver | None = None,
) -> ServerTransport:
    """A server's transport: the one registered as `mode` (`weights.transport`), built with these options."""
    return TRANSPORTS[check_transport(mode)](ServerOptions(mirror_dir, key, timeout_s, max_bytes, observer))
