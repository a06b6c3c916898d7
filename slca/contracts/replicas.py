"""What each serve replica says about itself in Redis (docs/design.md#replicas): who it is, where it answers,
which weight version it serves and how its last swap went.

One writer, one reader: every `slca serve` writes its own `ReplicaStatus` (`slca.replicas.announce`: at start,
after every swap outcome, and every `heartbeat_s` seconds) under a key that expires after `ttl_s`; `slca status`
and the dashboard read them all back through `slca.replicas.read_replicas` as `ReplicaView`s. A replica that
stops heartbeating shows as stale after `STALE_HEARTBEATS` missed beats and disappears when its key expires.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from slca.contracts.wire import Contract

REPLICA_ID = re.compile(r"^[A-Za-z0-9\[][A-Za-z0-9._:@/+=\[\]-]{0,199}$")
"""A replica id: 1–200 characters of letters, digits and `._:@/+=-[]` (a host name or `[v6]` address and a port
fit), starting with a letter, a digit or `[`. It is part of a Redis key and of every trajectory: no spaces, no
control characters."""

ReplicaRole = Literal["both", "promoted", "candidate"]
"""Which version roles a replica serves (`serve.role`): both, or every request gets the promoted version, or the
candidate (docs/design.md#versions)."""

SwapOutcome = Literal["none", "ok", "failed", "refused"]
"""How the last swap attempt ended: `none` (none since start), `ok`, `failed` (fetch, verification or load failed;
the old version keeps serving), `refused` (the announcement itself was refused: signature, version guard)."""

STALE_HEARTBEATS = 3
"""A replica whose last status is older than this many of its own heartbeat periods shows as stale."""

MAX_ERROR_CHARS = 500
"""The last swap error is cut to this many characters (a status is a small record, read on every dashboard poll)."""


def check_replica_id(value: str) -> str:
    """`value` when it is a usable replica id; ValueError saying what is allowed otherwise."""
    if not isinstance(value, str) or not REPLICA_ID.match(value):
        raise ValueError(
            f"replica id {value!r} must be 1-200 characters of letters, digits and ._:@/+=-[] "
            "(no spaces), starting with a letter, a digit or ["
        )
    return value


class ReplicaStatus(Contract):
    """One serve replica's latest word about itself."""

    replica: str
    """Its id (`serve.replica_id`; `<hostname>:<port>` by default), also written on every trajectory it records."""
    url: str | None = None
    """The address it advertises for clients and load balancers (`serve.advertise_url`)."""
    policy_version: int = Field(ge=0)
    """The weight version it serves now."""
    role: ReplicaRole = "both"
    """`serve.role`: "promoted" and "candidate" replicas each hold one role (statuses without it: "both")."""
    last_swap: SwapOutcome = "none"
    last_swap_version: int | None = Field(default=None, ge=0)
    """The version the last swap attempt was about."""
    last_swap_at: float | None = None
    last_error: str | None = None
    """Why the last swap failed or was refused (cut to `MAX_ERROR_CHARS`); None after a successful one."""
    started_at: float
    updated_at: float = Field(default_factory=time.time)
    """Writer's clock, for people; staleness is measured on Redis' clock (`ReplicaView.age_s`)."""
    heartbeat_s: float = Field(gt=0)
    """How often the replica rewrites its status."""
    ttl_s: float = Field(gt=0)
    """How long its key lives after each write: a replica silent this long disappears from the listing."""

    @field_validator("replica")
    @classmethod
    def _id(cls, v: str) -> str:
        return check_replica_id(v)

    @field_validator("last_error")
    @classmethod
    def _short(cls, v: str | None) -> str | None:
        return None if v is None else v[:MAX_ERROR_CHARS]


@dataclass(frozen=True)
class ReplicaView:
    """A status as a reader sees it: the record plus how old it is."""

    status: ReplicaStatus
    age_s: float
    """Seconds since the replica last wrote it (from the key's remaining lifetime: Redis' clock, no clock skew
    between hosts)."""

    @property
    def stale(self) -> bool:
        """Missed `STALE_HEARTBEATS` heartbeats: the replica is down, hung or cut off from Redis."""
        return self.age_s > STALE_HEARTBEATS * self.status.heartbeat_s

    def to_json(self) -> dict[str, Any]:
        return {**self.status.model_dump(mode="json"), "age_s": round(self.age_s, 3), "stale": self.stale}
