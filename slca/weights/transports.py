"""One registry of weight transports: how an announced version reaches a server, by name (docs/design.md#weights).

A server's transport is `weights.transport` (`for_server`): each registered name maps to a factory of
`ServerOptions` (where fetched copies go, the key, the bounds, the fetch observer). The shipped ones: `disk` (read the
announced directory in place: one machine, or a shared filesystem), `http` (fetch the announced `url` into a verified
local copy), `auto` (the disk where the announced directory exists here, else HTTP). The learner's transport is the
same `weights.transport`, looked up in the learner's registry (`for_learner`, `LearnerOptions`): `disk` publishes
into the versions directory only, `http` also serves it on `weights.bind`, `auto` serves it when `weights.bind` is
set. A new transport is a class with a server's side (`fetch`, `retain`, `stats`, `close`) and a learner's
(`connect`, `url_for`, `close`), and a factory for each: `@register_transport("name")` and
`@register_transport("name", side="learner")`; an unknown name is refused listing the registered ones."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Protocol

from slca.contracts import WeightManifest
from slca.weights.disk import DiskTransport, TransportStats
from slca.weights.errors import WeightLoadError
from slca.weights.fetch_report import FetchObserver
from slca.weights.http import HttpTransport
from slca.weights.verify import ManifestPolicy, WeightVersion


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


class LearnerTransport(Protocol):
    """The learner's side of a transport: makes its published versions reachable and says where (`url_for`)."""

    name: str

    def connect(self) -> None:
        """Start whatever serves the versions (may raise OSError: an address taken, ValueError: a bad address)."""
        ...

    def url_for(self, version: int) -> str | None:
        """Where servers fetch `version` from, announced in its signed manifest; None: its `path`, in place."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class LearnerOptions:
    """What the learner's side of a transport may need (`weights.*`)."""

    weights_dir: Path
    """The versions directory the learner publishes into (`<common.data_dir>/weights`)."""
    bind: str | None = None
    """`weights.bind`: `host:port` to serve the versions on."""
    url: str | None = None
    """`weights.url`: the base URL announced to servers (None: from `bind`)."""
    key: str | None = None
    """`weights.key`: a fetch must carry the token derived from it."""


class UnknownTransportError(ValueError):
    """A transport name that is not registered; the message lists the registered ones."""


TRANSPORTS: dict[str, Callable[[ServerOptions], ServerTransport]] = {}
"""A server's side of each transport, by name."""
LEARNER_TRANSPORTS: dict[str, Callable[[LearnerOptions], LearnerTransport]] = {}
"""The learner's side of each transport, by name."""
_SIDES: dict[str, dict[str, Callable]] = {"server": TRANSPORTS, "learner": LEARNER_TRANSPORTS}


def register_transport(name: str, side: Literal["server", "learner"] = "server"):
    """Register a transport factory under `name`: a server's side `(ServerOptions) -> ServerTransport`, or with
    `side="learner"` the learner's `(LearnerOptions) -> LearnerTransport`."""
    registry = _SIDES[side]

    def deco(factory: Callable):
        if name in registry:
            raise ValueError(f"weight transport {name!r} registered twice ({side} side)")
        registry[name] = factory
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

    def fetch_manifest(self, base_url: str, version: int) -> WeightManifest:
        return self.http.fetch_manifest(base_url, version)

    def retain(self, versions: set[int]) -> None:
        self.http.retain(versions)

    def close(self) -> None:
        pass


def fetches_by_number(transport: ServerTransport) -> bool:
    """`transport` can fetch a version it knows by number only (`fetch_by_number`): it has `fetch_manifest`."""
    return callable(getattr(transport, "fetch_manifest", None))


def fetch_by_number(transport: ServerTransport, base_url: str, version: int, policy: ManifestPolicy) -> WeightVersion:
    """Version `version`, known by number only (a promotion, a pin, the recorded promoted version at a restart:
    serve/version_store.py), from the learner's weight server at `base_url` (`weights.url`): its manifest must pass
    `policy` as an announcement does (signed with `weights.key`; no version guard: there is no announcement to
    measure the jump from) and be of `version`; then the follower's `transport.fetch`, every file hashed against
    that manifest. Blocking: run it off the event loop. FetchError when it could not be fetched (`reason` as a
    fetch's), WeightLoadError when it was refused."""
    manifest = transport.fetch_manifest(base_url, version)  # type: ignore[attr-defined]
    if manifest.version != version:
        raise WeightLoadError(f"{base_url}: the manifest of v{version} is of v{manifest.version}; refused")
    try:
        refusal = policy.refusal(manifest, None)
    except Exception as exc:  # a manifest the check chokes on is refused like a forged one (as the follower does)
        refusal = f"unverifiable ({exc!r})"
    if refusal:
        raise WeightLoadError(f"{base_url}: the manifest of v{version} is refused: {refusal}")
    return transport.fetch(manifest)


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


@register_transport("disk", side="learner")
def _disk_learner(options: LearnerOptions) -> DiskTransport:
    if options.bind:  # refused rather than ignored: servers on other hosts would wait for versions never served
        raise ValueError(f"weights.bind is {options.bind!r}, but weights.transport=disk serves nothing over HTTP")
    return DiskTransport()


@register_transport("http", side="learner")
def _http_learner(options: LearnerOptions) -> HttpTransport:
    if not options.bind:
        raise ValueError("weights.transport=http needs weights.bind (host:port to serve the versions on)")
    return HttpTransport(options.weights_dir, bind=options.bind, url=options.url, key=options.key)


@register_transport("auto", side="learner")
def _auto_learner(options: LearnerOptions) -> DiskTransport | HttpTransport:
    # servers with `auto` read the directory where they see it, so the disk is always published; HTTP besides when
    # there is an address to serve it on
    return _http_learner(options) if options.bind else DiskTransport()


def for_learner(mode: str, options: LearnerOptions) -> LearnerTransport:
    """The learner's transport (not yet connected): the one registered as `mode` (`weights.transport`). ValueError
    when `options` do not fit it (`http` without `bind`, `disk` with one)."""
    check_transport(mode)
    if mode not in LEARNER_TRANSPORTS:
        raise UnknownTransportError(
            f"weight transport {mode!r} has no learner side; with one: {', '.join(sorted(LEARNER_TRANSPORTS))}"
        )
    return LEARNER_TRANSPORTS[mode](options)


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
