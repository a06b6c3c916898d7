"""Names of the Redis streams, keys and channels that connect the components (DESIGN.md §1, §7-8)."""

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
