"""Names of the Redis streams, keys and channels that connect the components (docs/design.md#queues)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Streams:
    """Redis names shared by every component. A prefix lets several systems share one Redis."""

    prefix: str = "slca"

    @property
    def trajectories(self) -> str:
        """Stream: finished episodes, written by serve, read by the workers' stream consumer."""
        return f"{self.prefix}:trajectories"

    @property
    def groups(self) -> str:
        """Stream: scored rollout groups, written by the group assembler, read by the learner."""
        return f"{self.prefix}:groups"

    @property
    def dead(self) -> str:
        """Stream: entries that failed N deliveries, each with a `reason` field."""
        return f"{self.prefix}:dead"

    @property
    def weights_channel(self) -> str:
        """Pub/sub channel: a JSON `WeightManifest` for every published version."""
        return f"{self.prefix}:weights"

    @property
    def weights_latest(self) -> str:
        """Key: the JSON `WeightManifest` of the newest published version."""
        return f"{self.prefix}:weights:latest"

    @property
    def replicas(self) -> str:
        """Sorted set: every serve replica's id, scored by its last write (the index `slca.replicas` reads)."""
        return f"{self.prefix}:replicas"

    def replica(self, replica_id: str) -> str:
        """Key: one replica's JSON `ReplicaStatus`, expiring `ttl_s` after its last write."""
        return f"{self.prefix}:replica:{replica_id}"

    def stats(self, suffix: str) -> str:
        return f"{self.prefix}:{suffix}"


DEAD_MAXLEN = 10_000
"""MAXLEN (approximate: Redis trims whole nodes, so up to ~100 more) of the dead-letter stream `<prefix>:dead`, which
the workers (`workers.dead_maxlen`'s default) and the learner (an undecodable group) both write: the oldest dead
letters go first."""

PAYLOAD_FIELD = b"data"
"""Every stream entry carries one msgpack-encoded contract under this field (plus optional plain fields)."""

STATS_REWARDS = "stats:rewards"
"""Capped stream (suffix after the prefix) of recent scores for dashboards, one `slca.contracts.stats.RewardStats`
per entry (exec, pref, tool_turns, policy_version, task_id, ts) — written by the scorers."""
STATS_LEARNER = "stats:learner"
"""Capped stream of learner steps, one `slca.contracts.stats.LearnerStepStats` per entry (step, version, loss, kl,
clip_frac, groups, ts, and zero_var/<channel>: share of the step's groups with zero reward variance in that
estimator channel) — written by the learner."""
STATS_PROBE = "stats:probe"
"""Capped stream of the feed's held-out probe rounds: one field `json` per round (`slca.contracts.stats.probe_fields`
of `ops.observe.probe_rounds.ProbeRound.to_json`) — written by the probe."""


def encode_entry(obj, **plain: str | int | float) -> dict[bytes, bytes]:
    """Stream entry for a contract object: msgpack payload plus small plain fields (ids, for idempotence)."""
    from slca.contracts.wire import dump_msgpack

    entry = {PAYLOAD_FIELD: dump_msgpack(obj)}
    entry.update({k.encode(): str(v).encode() for k, v in plain.items()})
    return entry


def decode_entry(cls, fields: dict):
    """Inverse of `encode_entry`; raises `ContractError` for a missing or invalid payload."""
    from slca.contracts.wire import ContractError, load_msgpack

    payload = fields.get(PAYLOAD_FIELD, fields.get(PAYLOAD_FIELD.decode()))
    if payload is None:
        raise ContractError(f"invalid {cls.__name__}: stream entry has no '{PAYLOAD_FIELD.decode()}' field")
    return load_msgpack(cls, payload)
