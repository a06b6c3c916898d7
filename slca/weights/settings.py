"""`[weights]`: every key about weight versions — how they are signed, carried, kept, followed and verified — in one
section, read by whoever publishes (`slca learn`, `slca train`, the warm start) and whoever loads (`slca serve`).
One section rather than a share of each component's: both sides must agree on the key, the transport and the
address, and an operator should find them in one place (docs/design.md#weights)."""

from __future__ import annotations

from pydantic import Field, field_validator

from slca.config import SectionSettings
from slca.redaction import secret_field
from slca.weights.transports import check_transport


class WeightsSettings(SectionSettings):
    """`[weights]`: signing, transport, retention, following and verification of the published weight versions."""

    key: str | None = secret_field(None)
    """Key of the weight announcements: the learner signs each manifest with it (HMAC-SHA256), serve loads only
    versions signed with it, so that whoever can write Redis cannot make a server load their weights; an HTTP fetch
    carries a token derived from it. `slca up` generates one when unset. None: the learner publishes unsigned
    manifests, which serve refuses unless `allow_unsigned`."""
    allow_unsigned: bool = False
    """Development and tests only: serve accepts unsigned weight announcements when no `key` is set (with a
    warning). Anyone who can write Redis can then make the server load any directory it can read."""
    transport: str = "auto"
    """A registered weight transport (slca/weights/transports.py), on both sides. A server: 'disk' reads the
    announced directory in place; 'http' fetches its files from the announced `url` into `mirror_dir`, each hashed
    against the signed manifest; 'auto' reads the directory when it exists here, else fetches. The learner: 'disk'
    publishes into the versions directory only; 'http' also serves it on `bind`; 'auto' serves it when `bind` is
    set."""
    bind: str | None = None
    """`host:port` on which the learner serves its published versions over HTTP, for servers on other hosts (no
    shared filesystem; slca/weights/http.py); port 0 picks a free one. None: not served, servers read the versions
    directory (one machine). With `key` set, a fetch needs a token derived from it."""
    url: str | None = None
    """The base URL servers fetch the versions from, announced (signed) in each manifest, e.g.
    `http://learner:9200`; None: `http://<bind>` (required when `bind` listens on every interface, 0.0.0.0 or ::).
    Set on a server (with `transport` http or auto), it is where a version known by number only — a promotion, a
    pin, the recorded promoted version at start — that is not on its disk is fetched from (`<url>/v<N>/`): how a
    `serve.role=promoted` replica, which follows no announcements, gets versions without a shared disk."""
    keep_versions: int = Field(default=3, ge=0)
    """Published weight versions the learner keeps on disk (older ones are deleted; 0 keeps all)."""
    follow: bool = True
    """serve follows `<common.stream_prefix>:weights` (and `:weights:latest` at start) to hot-swap published
    versions. False: announcements are ignored (`/admin/weights` still swaps)."""
    mirror_dir: str | None = None
    """Where a server keeps fetched versions (only the one served stays); None:
    `<common.data_dir>/serve-weights/<serve.port>`."""
    fetch_timeout_s: float = Field(default=60.0, gt=0)
    """A weight fetch over HTTP fails when the learner does not answer (or sends nothing) for this long."""
    fetch_max_bytes: int = Field(default=64 << 30, ge=1)
    """A version whose files add up to more than this (64 GiB) is refused while it is fetched, before it fills the
    disk."""
    max_version_jump: int = Field(default=1000, ge=1)
    """A weight announcement more than this many versions above the last one accepted is refused (a guard against
    a pinned version such as 2**62, in depth behind the signature; the first announcement after start is exempt:
    a restarted server may meet a learner far ahead)."""

    @field_validator("transport")
    @classmethod
    def _registered_transport(cls, v: str) -> str:
        return check_transport(v)
