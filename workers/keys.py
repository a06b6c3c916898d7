"""Redis names private to the workers (idempotence marks, group buckets). Shared names are in `slca.contracts.Streams`.

Group assembly keys are computed inside Lua scripts from these prefixes, so the scripts need a single Redis
(or Sentinel), not Cluster; a Cluster deployment would put `{task_id}` hash tags into these names.

The exactly-once marks (`member`, `reward`, `entry`, `emitted`, `dead_mark`) expire after `workers.key_ttl_s`, so that
they do not pile up forever; which also makes them what a `volatile-*` eviction policy evicts first. Losing one early
would let a redelivered trajectory be scored and grouped twice: the Redis must not evict (`slca up` runs its own with
`maxmemory-policy noeviction`, ops/settings.py; a configured one is checked at start, `redisconn.eviction_warning`).
"""

from __future__ import annotations

from dataclasses import dataclass

from slca.contracts import Streams


@dataclass(frozen=True)
class Keys:
    streams: Streams

    @property
    def base(self) -> str:
        return f"{self.streams.prefix}:w"

    def reward(self, scorer_version: str, traj_id: str) -> str:
        """Stored reward (JSON): re-scoring the same trajectory with the same scorer returns it."""
        return f"{self.base}:reward:{scorer_version}:{traj_id}"

    def member(self, traj_id: str) -> str:
        """Set once a trajectory joined a group bucket (or was recorded late): later deliveries are duplicates."""
        return f"{self.base}:member:{traj_id}"

    def bucket(self, task_id: str, window: int | str) -> str:
        """Hash of the scored members of one task in one policy-version window: t:<id> trajectory, r:<id> reward."""
        return f"{self.base}:bucket:{window}:{task_id}"

    @property
    def buckets(self) -> str:
        """Sorted set: open bucket → time its first member arrived (for the partial-group timeout)."""
        return f"{self.base}:buckets"

    def sealed(self, bucket: str) -> str:
        """After a partial emission: how many more members of that bucket would be late."""
        return f"{bucket}:sealed"

    @property
    def claim_prefix(self) -> str:
        """A complete bucket renamed to `<claim_prefix><group_id>` until its group is written."""
        return f"{self.base}:claim:"

    @property
    def claims(self) -> str:
        """Sorted set: group id → time it was claimed (a claim left behind by a dead writer is re-emitted)."""
        return f"{self.base}:claims"

    def emitted(self, group_id: str) -> str:
        return f"{self.base}:emitted:{group_id}"

    def dead_mark(self, entry_id: str) -> str:
        return f"{self.base}:dead:{entry_id}"

    @property
    def entry_prefix(self) -> str:
        """`<entry_prefix><trajectory id>` holds the id of the trajectory's entry in `slca:trajectories` while it
        waits in a bucket: the scripts that write its group (or dead-letter it) delete that entry."""
        return f"{self.base}:entry:"

    def entry(self, traj_id: str) -> str:
        return f"{self.entry_prefix}{traj_id}"
